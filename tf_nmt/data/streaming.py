"""Training batches streamed from an own corpus's shard files (:mod:`tf_nmt.data.prepared`).

A corpus of any size trains in bounded memory: each worker reads only its own shards
(:meth:`PreparedData.rank_shards`), a few files at a time, and holds at most ``shuffle_buffer``
pairs for shuffling. The file order is reshuffled every epoch from the seed, the files are
interleaved deterministically and the records decoded in-graph, so the stream is a function of
the seed alone: a resumed run skips the batches it has consumed (``dataset.skip(step)``) and
sees exactly what an uninterrupted run would have seen. Batching is
:func:`tf_nmt.data.pipeline.batch_pairs`, the same as the in-memory built-in corpus's.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence, Tuple

from tf_nmt.compat import tf
from tf_nmt.data.pipeline import batch_pairs

#: Shard files read at a time by one worker (each one record ahead, in turn).
CYCLE_LENGTH = 4


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
