"""tf.data input pipeline: pre-tokenised pairs → length filter → shard → shuffle → token-budget
buckets → ({"source", "target_in"}, target_out) batches, prefetched.

The corpus is tokenised once into ragged tensors (SentencePiece in-graph is fast, but doing it
every epoch is wasted work); batches are built by bucketing on the longer side of each pair so
that ``batch_size * padded_length <= batch_tokens`` holds for every batch (OpenNMT-tf/fairseq-style
token-based batching).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from tf_nmt.compat import tf
from tf_nmt.config import ConfigError, DataConfig
from tf_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizers, TokenizerPair
from tf_nmt.data.weighting import check_oversample


@dataclass(frozen=True)
class EncodedCorpus:
    """Token ids of a parallel corpus (no bos/eos), ragged [N, (len)]."""

    source: tf.RaggedTensor
    target: tf.RaggedTensor

    def __len__(self) -> int:
        return int(self.source.nrows())


def encode_corpus(pairs: Sequence[Tuple[str, str]], tokenizer: Tokenizers,
                  chunk: int = 8192) -> EncodedCorpus:
    """Tokenise all (source, target) pairs once, in chunks to bound memory (each side with its
    own model when ``tokenizer`` is a separate :class:`TokenizerPair`)."""
    vocab = TokenizerPair.of(tokenizer)
    if not pairs:
        raise ValueError("cannot build a dataset from an empty corpus")
    src_parts: List[tf.RaggedTensor] = []
    tgt_parts: List[tf.RaggedTensor] = []
    for start in range(0, len(pairs), chunk):
        block = pairs[start:start + chunk]
        src_parts.append(vocab.source.tokenize(tf.constant([s for s, _ in block])))
        tgt_parts.append(vocab.target.tokenize(tf.constant([t for _, t in block])))
    return EncodedCorpus(tf.concat(src_parts, axis=0), tf.concat(tgt_parts, axis=0))


def bucket_plan(batch_tokens: int, max_length: int, width: int = 0) -> Tuple[List[int], List[int]]:
    """Bucket boundaries and per-bucket batch sizes for a token budget.

    Lengths ``< boundaries[i]`` fall in bucket i; a batch of bucket i is padded to at most
    ``boundaries[i] - 1`` tokens, so ``batch_size = batch_tokens // (boundaries[i] - 1)`` keeps
    every batch within budget. The last bucket holds lengths up to ``max_length``.

    ``width`` 0 gives geometric buckets (8, 12, 16, 20, 25, ... growing by a quarter); ``width``
    w >= 1 gives buckets of w lengths each (OpenNMT-tf's ``length_bucket_width``): with w = 1
    every pair of a batch has the same longer side, so the budget is filled with less padding.
    """
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    if width < 0:
        raise ValueError(f"bucket width must be >= 0 (0: geometric buckets), got {width}")
    if batch_tokens < max_length + 1:
        raise ValueError(f"batch_tokens ({batch_tokens}) must be at least max_length + 1 "
                         f"({max_length + 1}) so that one longest pair fits in a batch")
    boundaries: List[int] = []
    if width:
        boundaries = list(range(width + 1, max_length + 1, width))
    else:
        bound = 8
        while bound <= max_length:
            boundaries.append(bound)
            bound = max(bound + 4, int(bound * 1.25))
    upper = boundaries + [max_length + 2]
    sizes = [max(1, batch_tokens // (b - 1)) for b in upper]
    return boundaries, sizes


def check_data_config(data: DataConfig) -> None:
    """ConfigError for ``data.*`` settings no batch plan can satisfy (before any data is read)."""
    try:
        bucket_plan(data.batch_tokens, data.max_length, data.length_bucket_width)
    except ValueError as e:
        raise ConfigError(f"data: {e}") from None
    if data.shuffle_buffer < 1:
        raise ConfigError(f"data.shuffle_buffer must be >= 1 (pairs held for shuffling), got "
                          f"{data.shuffle_buffer}")
    check_oversample(data.oversample)


def with_specials(src: tf.Tensor, tgt: tf.Tensor):
    """(source, target) ids -> (source + eos, bos + target, target + eos)."""
    eos = tf.constant([EOS_ID], tf.int32)
    bos = tf.constant([BOS_ID], tf.int32)
    return tf.concat([src, eos], 0), tf.concat([bos, tgt], 0), tf.concat([tgt, eos], 0)


def make_dataset(corpus: EncodedCorpus, batch_tokens: int = 4096, max_length: int = 100,
                 shuffle: bool = True, repeat: bool = True, seed: Optional[int] = None,
                 num_shards: int = 1, shard_index: int = 0,
                 shuffle_buffer: Optional[int] = None, bucket_width: int = 0) -> tf.data.Dataset:
    """Training/eval batches ``({"source": [B,S], "target_in": [B,T]}, target_out [B,T])``.

    ``max_length`` counts subword tokens including eos/bos; longer pairs are dropped.
    ``num_shards``/``shard_index`` give each distributed worker a disjoint slice of the corpus.
    ``bucket_width``: see :func:`bucket_plan` (``data.length_bucket_width``).
    ``shuffle_buffer``: pairs held for shuffling, at most this worker's share of the corpus
    (None: all of it).
    """
    if num_shards < 1 or not 0 <= shard_index < num_shards:
        raise ValueError(f"invalid shard {shard_index} of {num_shards}")
    if num_shards > len(corpus):
        raise ValueError(f"more data shards requested ({num_shards}) than sentence pairs "
                         f"({len(corpus)}): use fewer workers or more data")
    ds = tf.data.Dataset.from_tensor_slices((corpus.source, corpus.target))
    if num_shards > 1:
        ds = ds.shard(num_shards, shard_index)
    per_shard = max(1, len(corpus) // num_shards)  # a larger buffer holds no more pairs
    buffer = min(shuffle_buffer, per_shard) if shuffle_buffer else per_shard
    return batch_pairs(ds, batch_tokens, max_length, shuffle=shuffle, repeat=repeat, seed=seed,
                       shuffle_buffer=buffer, bucket_width=bucket_width)


def batch_pairs(pairs: tf.data.Dataset, batch_tokens: int, max_length: int, shuffle: bool,
                repeat: bool, seed: Optional[int], shuffle_buffer: int,
                bucket_width: int = 0) -> tf.data.Dataset:
    """(source ids, target ids) pairs without specials -> the training batches of
    :func:`make_dataset`: eos/bos added, pairs over ``max_length`` dropped, shuffled through a
    buffer of ``shuffle_buffer`` pairs, repeated, and batched by :func:`bucket_plan`. Shared by the
    in-memory corpus and the streamed shards (:mod:`tf_nmt.data.streaming`), so both batch alike."""
    ds = pairs.map(with_specials, num_parallel_calls=tf.data.AUTOTUNE).filter(fits(max_length))
    if shuffle:
        ds = ds.shuffle(max(1, shuffle_buffer), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        ds = ds.repeat()
    return bucket_batches(ds, batch_tokens, max_length, bucket_width).prefetch(tf.data.AUTOTUNE)


def fits(max_length: int):
    """The filter predicate of pairs with specials that are at most ``max_length`` long."""
    return lambda s, ti, to: tf.logical_and(tf.size(s) <= max_length, tf.size(ti) <= max_length)


def bucket_batches(pairs: tf.data.Dataset, batch_tokens: int, max_length: int,
                   bucket_width: int = 0) -> tf.data.Dataset:
    """Pairs with specials (:func:`with_specials`), none over ``max_length`` (:func:`fits`) ->
    the training batches, by :func:`bucket_plan` (a finite input ends with its part-filled
    buckets)."""
    boundaries, sizes = bucket_plan(batch_tokens, max_length, bucket_width)
    ds = pairs.bucket_by_sequence_length(
        element_length_func=lambda s, ti, to: tf.maximum(tf.size(s), tf.size(ti)),
        bucket_boundaries=boundaries,
        bucket_batch_sizes=sizes,
        padded_shapes=([None], [None], [None]),
        padding_values=(PAD_ID, PAD_ID, PAD_ID),
        drop_remainder=False,
    )
    return ds.map(lambda s, ti, to: ({"source": s, "target_in": ti}, to),
                  num_parallel_calls=tf.data.AUTOTUNE)


def make_source_batches(corpus_source: tf.RaggedTensor, batch_size: int) -> tf.data.Dataset:
    """Inference batches of source ids (with eos), in corpus order, padded per batch."""
    ds = tf.data.Dataset.from_tensor_slices(corpus_source)
    ds = ds.map(lambda s: tf.concat([s, tf.constant([EOS_ID], tf.int32)], 0))
    return ds.padded_batch(batch_size, padded_shapes=[None], padding_values=PAD_ID)
