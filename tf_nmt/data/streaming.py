"""Training batches streamed from an own corpus's shard files (:mod:`tf_nmt.data.prepared`).

A corpus of any size trains in bounded memory: each worker reads only its share of the pairs
(:meth:`PreparedData.rank_blocks`), a few blocks at a time, and holds at most two shuffle windows
of about ``shuffle_buffer`` pairs (:func:`rank_stream`). The records are decoded in-graph and
every order is drawn from the seed, so the stream is a function of the seed alone and can be
started at any recorded :class:`StreamPosition`. Batching is
:func:`tf_nmt.data.pipeline.bucket_batches`, the same as the in-memory built-in corpus's.
:func:`read_pairs` and :func:`make_shard_dataset` read whole files once (vocabulary maps, tests).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Tuple

from tf_nmt.compat import tf
from tf_nmt.data.pipeline import batch_pairs, bucket_batches, fits, with_specials
from tf_nmt.data.prepared import Block

#: Shard files read at a time by one worker (each one record ahead, in turn).
CYCLE_LENGTH = 4
#: Blocks that make one shuffle window of a rank's stream (see :func:`rank_stream`).
BLOCKS_PER_WINDOW = 4


def decode_pair(record: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    """A shard record (little-endian int32 ``[n_src, src..., tgt...]``, see
    :func:`tf_nmt.data.prepared.encode_record`) -> (source ids, target ids), in-graph."""
    values = tf.io.decode_raw(record, tf.int32, little_endian=True)
    n_src = values[0]
    return values[1:1 + n_src], values[1 + n_src:]


def read_pairs(files: Sequence[Path], shuffle: bool = True, seed: Optional[int] = None,
               cycle_length: int = CYCLE_LENGTH) -> tf.data.Dataset:
    """(source ids, target ids) of every record of ``files``, one pass: the file order shuffled
    (reshuffled on each pass of a repeated dataset) when ``shuffle``, ``cycle_length`` files
    interleaved record by record, deterministically."""
    names = [str(f) for f in files]
    if not names:
        raise ValueError("no shard files to read")
    ds = tf.data.Dataset.from_tensor_slices(names)
    if shuffle and len(names) > 1:
        ds = ds.shuffle(len(names), seed=seed, reshuffle_each_iteration=True)
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=max(1, min(cycle_length, len(names))),
                       block_length=1, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.map(decode_pair, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def make_shard_dataset(files: Sequence[Path], batch_tokens: int = 4096, max_length: int = 100,
                       shuffle: bool = True, repeat: bool = True, seed: Optional[int] = None,
                       shuffle_buffer: int = 100_000, bucket_width: int = 0,
                       cycle_length: int = CYCLE_LENGTH) -> tf.data.Dataset:
    """Batches ``({"source": [B,S], "target_in": [B,T]}, target_out [B,T])`` of the pairs in the
    shard ``files``, as :func:`tf_nmt.data.pipeline.make_dataset` makes them of an in-memory
    corpus (same specials, length filter and token-budget buckets). ``shuffle_buffer``: pairs
    held for shuffling (the memory bound); ``seed`` fixes file order and shuffle."""
    if shuffle_buffer < 1:
        raise ValueError(f"shuffle_buffer must be >= 1, got {shuffle_buffer}")
    pairs = read_pairs(files, shuffle=shuffle, seed=seed, cycle_length=cycle_length)
    return batch_pairs(pairs, batch_tokens, max_length, shuffle=shuffle, repeat=repeat, seed=seed,
                       shuffle_buffer=shuffle_buffer, bucket_width=bucket_width)


@dataclass(frozen=True)
class StreamPosition:
    """A place in a rank's stream (:func:`rank_stream`): the data ``epoch``, the ``window`` of
    that epoch and the number of that window's batches already consumed (``batch``)."""

    epoch: int = 0
    window: int = 0
    batch: int = 0


def block_pairs(shuffle_buffer: int) -> int:
    """Records per :class:`Block` for a shuffle window of ``shuffle_buffer`` pairs."""
    return max(1, -(-int(shuffle_buffer) // BLOCKS_PER_WINDOW))


def rank_stream(blocks: Sequence[Block], batch_tokens: int, max_length: int, seed: int,
                shuffle_buffer: int, bucket_width: int = 0,
                start: StreamPosition = StreamPosition()) -> tf.data.Dataset:
    """A rank's endless training stream over its share ``blocks``
    (:meth:`PreparedData.rank_blocks`), from ``start``: elements ``(batch, position)``, the
    batch as :func:`make_shard_dataset` makes them and ``position`` int64 ``[epoch, window,
    index]`` (the batch's place, ``index`` counted in its window).

    One data epoch reads every pair of the share once: the blocks in an order drawn from
    ``(seed, epoch)``, :data:`BLOCKS_PER_WINDOW` at a time as one window, whose pairs are
    permuted from ``(seed, epoch, window)`` and batched on their own (a window's last batches
    may be part-filled). A window's batches therefore depend on nothing before it, so the stream
    can start anywhere: ``start`` costs reading its window, never the batches before it. At most
    two windows (the one batched and the next, read ahead) are held, each of about
    ``shuffle_buffer`` pairs."""
    if not blocks:
        raise ValueError("no blocks to read")
    if shuffle_buffer < 1:
        raise ValueError(f"shuffle_buffer must be >= 1, got {shuffle_buffer}")
    count = len(blocks)
    per_window = BLOCKS_PER_WINDOW
    windows = -(-count // per_window)
    capacity = sum(sorted((b.count for b in blocks), reverse=True)[:per_window])
    paths = tf.constant([str(b.path) for b in blocks])
    starts = tf.constant([b.start for b in blocks], tf.int64)
    counts = tf.constant([b.count for b in blocks], tf.int64)
    seed = tf.constant(int(seed), tf.int64)

    def epoch_windows(epoch):
        order = tf.random.experimental.stateless_shuffle(tf.range(count), tf.stack([seed, epoch]))
        grid = tf.reshape(tf.concat([order, tf.fill([windows * per_window - count], -1)], 0),
                          [windows, per_window])
        return tf.data.Dataset.from_tensor_slices(
            (tf.fill([windows], epoch), tf.range(windows, dtype=tf.int64), grid))

    def read_window(epoch, window, members, skip):
        chosen = tf.boolean_mask(members, members >= 0)
        parts = tf.data.Dataset.from_tensor_slices(
            (tf.gather(paths, chosen), tf.gather(starts, chosen), tf.gather(counts, chosen)))
        pairs = parts.interleave(
            lambda path, first, n: tf.data.TFRecordDataset(path).skip(first).take(n),
            cycle_length=per_window, block_length=1, num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True).map(decode_pair, num_parallel_calls=tf.data.AUTOTUNE)
        src, tgt = pairs.ragged_batch(capacity).get_single_element()
        order = tf.random.experimental.stateless_shuffle(
            tf.range(src.nrows()), tf.stack([seed + 1, epoch * 1_000_003 + window]))
        return tf.gather(src, order), tf.gather(tgt, order), epoch, window, skip

    def window_batches(src, tgt, epoch, window, skip):
        pairs = tf.data.Dataset.from_tensor_slices((src, tgt)).map(
            with_specials, num_parallel_calls=tf.data.AUTOTUNE).filter(fits(max_length))
        batches = bucket_batches(pairs, batch_tokens, max_length, bucket_width).enumerate()
        return batches.skip(skip).map(
            lambda index, batch: (batch, tf.stack([epoch, window, index])))

    ds = tf.data.Dataset.counter(int(start.epoch)).flat_map(epoch_windows).skip(int(start.window))
    ds = ds.enumerate().map(lambda i, d: (*d, tf.where(i == 0, tf.constant(start.batch, tf.int64),
                                                       tf.constant(0, tf.int64))))
    ds = ds.map(read_window).prefetch(1)  # the next window is read while this one is batched
    return ds.flat_map(window_batches).prefetch(tf.data.AUTOTUNE)
