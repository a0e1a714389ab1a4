"""Real training batches for measurements that step a model outside ``tf-nmt train``: the
precision probe of the quickstart and the studies' timed steps.

One builder for all of them, so that what they time is batched exactly as training batches
(token budget, length buckets) from a seeded sample of the train split."""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any, List, Tuple

from tf_nmt.config import DataConfig
from tf_nmt.data.pipeline import encode_corpus, make_dataset
from tf_nmt.data.tokenizer import SubwordTokenizer
from tf_nmt.data.data_dir import vocab_path
from tf_nmt.data.weighting import load_train_pairs


def sample_batches(data: DataConfig, count: int, pairs_per_rank: int, rank: int = 0,
                   size: int = 1) -> Tuple[SubwordTokenizer, List[Any]]:
    """``count`` training batches of rank ``rank`` of ``size``: ``pairs_per_rank * size`` train
    pairs sampled with ``data.shuffle_seed``, the rank's shard of them, tokenised and batched by
    :func:`~tf_nmt.data.pipeline.make_dataset` as the trainer does (shuffled with the seed plus
    the rank, repeated).

    Returns (tokenizer, [(features, labels), ...]). Encoding only a sample keeps the start-up
    short (oversubscribed ranks, the quickstart's probe)."""
    if count < 1 or pairs_per_rank < 1 or not 0 <= rank < size:
        raise ValueError(f"need count >= 1, pairs_per_rank >= 1 and 0 <= rank < size, got "
                         f"{count}, {pairs_per_rank}, {rank}, {size}")
    data_dir = Path(data.data_dir)
    vocab = vocab_path(data_dir, data.vocab_size)
    if not vocab.is_file():
        raise FileNotFoundError(f"no vocabulary {vocab}: run `tf-nmt prepare-data --data-dir "
                                f"{data_dir} --vocab-size {data.vocab_size}` first")
    tokenizer = SubwordTokenizer.load(vocab)
    pairs = load_train_pairs(data_dir, data.oversample)  # the trainer's pair list
    order = list(range(len(pairs)))
    random.Random(data.shuffle_seed).shuffle(order)
    sample = [pairs[i] for i in order[:pairs_per_rank * size]][rank::size]
    ds = make_dataset(encode_corpus(sample, tokenizer), data.batch_tokens, data.max_length,
                      shuffle=True, repeat=True, seed=data.shuffle_seed + rank,
                      bucket_width=data.length_bucket_width)
    return tokenizer, list(ds.take(count))
