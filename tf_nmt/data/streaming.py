"""Training batches streamed from an own corpus's shard files (:mod:`tf_nmt.data.prepared`).

A corpus of any size trains in bounded memory: each worker reads only its share of the pairs
(:meth:`PreparedData.rank_blocks`), a few blocks at a time, and holds at most two shuffle windows
of about ``shuffle_buffer`` pairs (:func:`rank_stream`). The records are decoded in-graph and
every order is drawn from the seed, so the stream is a function of the seed alone and can be
started at any recorded :class:`StreamPosition`. Batches follow the in-memory built-in
corpus's token-budget buckets (:func:`tf_nmt.data.pipeline.bucket_plan`), window by window
(:func:`window_plan`).
:func:`read_pairs` and :func:`make_shard_dataset` read whole files once (vocabulary maps, tests).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Tuple

import numpy as np

from tf_nmt.compat import tf
from tf_nmt.data.pipeline import batch_pairs, bucket_plan
from tf_nmt.data.prepared import Block
from tf_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID

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


def window_plan(src_lengths: np.ndarray, tgt_lengths: np.ndarray, batch_tokens: int,
                max_length: int, bucket_width: int, seed: Sequence[int]
                ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """How one window's pairs (their token counts without specials) make batches: ``(order,
    first, end)``, batch k being the pairs ``order[first[k]:end[k]]``, the batches in an order
    drawn from ``seed``. Pairs longer than ``max_length`` with their specials are left out.
    Each bucket of :func:`tf_nmt.data.pipeline.bucket_plan` gives full batches of its size, in
    window order; what remains (less than a batch per bucket) is sorted by length and packed
    under the token budget, so the window ends in few part-filled batches, not one per
    bucket."""
    boundaries, sizes = bucket_plan(batch_tokens, max_length, bucket_width)
    src, tgt = np.asarray(src_lengths) + 1, np.asarray(tgt_lengths) + 1
    longer = np.maximum(src, tgt)
    kept = np.flatnonzero((src <= max_length) & (tgt <= max_length))
    bucket = np.searchsorted(boundaries, longer[kept], side="right")
    batches, rest = [], []
    for b in np.unique(bucket):
        members, size = kept[bucket == b], sizes[b]
        full = len(members) // size * size
        batches += np.split(members[:full], full // size) if full else []
        rest.append(members[full:])
    rest = np.concatenate(rest) if rest else np.zeros(0, np.int64)
    rest = rest[np.argsort(longer[rest], kind="stable")]
    start = 0
    for i in range(1, len(rest) + 1):  # a batch ends before the pair that would break the budget
        if i == len(rest) or (i - start + 1) * longer[rest[i]] > batch_tokens:
            batches.append(rest[start:i])
            start = i
    batches = [batches[k] for k in np.random.default_rng(list(seed)).permutation(len(batches))]
    counts = np.array([len(b) for b in batches], np.int64)
    end = np.cumsum(counts)
    order = np.concatenate(batches).astype(np.int64) if batches else np.zeros(0, np.int64)
    return order, end - counts, end


def rank_stream(blocks: Sequence[Block], batch_tokens: int, max_length: int, seed: int,
                shuffle_buffer: int, bucket_width: int = 0,
                start: StreamPosition = StreamPosition()) -> tf.data.Dataset:
    """A rank's endless training stream over its share ``blocks``
    (:meth:`PreparedData.rank_blocks`), from ``start``: elements ``(batch, position)``, the
    batch as :func:`make_shard_dataset` makes them and ``position`` int64 ``[epoch, window,
    index]`` (the batch's place, ``index`` counted in its window).

    One data epoch reads every pair of the share once: the blocks in an order drawn from
    ``(seed, epoch)``, :data:`BLOCKS_PER_WINDOW` at a time as one window, whose pairs are
    permuted from ``(seed, epoch, window)`` and batched on their own (:func:`window_plan`). A
    window's batches therefore depend on nothing before it, so the stream
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
    seed_value = int(seed) & 0x7FFFFFFF
    seed = tf.constant(seed_value, tf.int64)

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

    def plan(src_lengths, tgt_lengths, epoch, window):
        return window_plan(src_lengths, tgt_lengths, batch_tokens, max_length, bucket_width,
                           (int(seed_value), int(epoch), int(window)))

    def window_batches(src, tgt, epoch, window, skip):
        order, first, end = tf.numpy_function(
            plan, [src.row_lengths(), tgt.row_lengths(), epoch, window],
            [tf.int64, tf.int64, tf.int64], stateful=False)
        order.set_shape([None])

        def batch(index, bounds):
            rows = order[bounds[0]:bounds[1]]
            source, target = tf.gather(src, rows), tf.gather(tgt, rows)
            n = tf.shape(rows)[:1]
            eos = tf.RaggedTensor.from_tensor(tf.fill(tf.concat([n, [1]], 0), EOS_ID))
            bos = tf.RaggedTensor.from_tensor(tf.fill(tf.concat([n, [1]], 0), BOS_ID))
            features = {"source": tf.concat([source, eos], 1).to_tensor(PAD_ID),
                        "target_in": tf.concat([bos, target], 1).to_tensor(PAD_ID)}
            return ((features, tf.concat([target, eos], 1).to_tensor(PAD_ID)),
                    tf.stack([epoch, window, index]))

        bounds = tf.data.Dataset.from_tensor_slices(tf.stack([first, end], axis=1))
        return bounds.enumerate().skip(skip).map(batch, num_parallel_calls=tf.data.AUTOTUNE)

    ds = tf.data.Dataset.counter(int(start.epoch)).flat_map(epoch_windows).skip(int(start.window))
    ds = ds.enumerate().map(lambda i, d: (*d, tf.where(i == 0, tf.constant(start.batch, tf.int64),
                                                       tf.constant(0, tf.int64))))
    ds = ds.map(read_window).prefetch(1)  # the next window is read while this one is batched
    return ds.flat_map(window_batches).prefetch(tf.data.AUTOTUNE)
