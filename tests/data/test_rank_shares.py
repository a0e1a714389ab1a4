"""Balanced ranks (issue 55): every rank trains on its share of the corpus's pairs, whatever the
number of shards, and a data epoch reads each pair of the corpus exactly once."""
from collections import Counter

import pytest

from tests.data.own_corpus_fixture import shard_pairs, write_own_corpus
from tests.data.test_streaming import batch_pairs_of
from tf_nmt.data.prepared import DataError, read_prepared, share_bounds
from tf_nmt.data.streaming import block_pairs, rank_stream

EPOCHS = 3


@pytest.fixture(scope="module")
def five_shards(tmp_path_factory):
    """5 shards of 16 pairs: neither 2 nor 3 ranks divide them."""
    return write_own_corpus(tmp_path_factory.mktemp("five"), num_shards=5, repeats=1)


def test_shares_are_consecutive_disjoint_and_differ_by_at_most_one():
    for total, world in ((80, 3), (7, 7), (220 * 1000 + 5, 64)):
        bounds = [share_bounds(total, world, r) for r in range(world)]
        assert bounds[0][0] == 0 and bounds[-1][1] == total
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
        sizes = [high - low for low, high in bounds]
        assert max(sizes) - min(sizes) <= 1


def epochs_of(prepared, world, rank, buffer=16):
    """Counter of (pair) per data epoch, over the first EPOCHS epochs of the rank's stream."""
    blocks = prepared.rank_blocks(world, rank, block_pairs(buffer))
    per_epoch = [Counter() for _ in range(EPOCHS)]
    for batch, position in rank_stream(blocks, 256, 100, seed=5 + rank, shuffle_buffer=buffer,
                                       bucket_width=1):
        epoch = int(position[0])
        if epoch >= EPOCHS:
            break
        per_epoch[epoch].update(batch_pairs_of(batch))
    return blocks, per_epoch


@pytest.mark.parametrize("world", [2, 3])
def test_every_pair_once_per_epoch_on_any_number_of_ranks(five_shards, world):
    prepared = read_prepared(five_shards)
    corpus = Counter(shard_pairs(five_shards))
    shares = []
    for epoch in range(EPOCHS):
        together = Counter()
        for rank in range(world):
            blocks, per_epoch = epochs_of(prepared, world, rank)
            if epoch == 0:
                shares.append(sum(b.count for b in blocks))
            together.update(per_epoch[epoch])
            # a rank reads each pair of its share once per epoch: the same pairs every epoch
            assert per_epoch[epoch] == per_epoch[0]
        assert together == corpus, epoch
    assert sum(shares) == 80 and max(shares) - min(shares) <= 1


def test_a_shard_is_split_between_ranks_at_its_record_counts(five_shards):
    prepared = read_prepared(five_shards)
    blocks = prepared.rank_blocks(3, 1, block_pairs(16))  # pairs [26, 53) of 5 x 16
    assert [(b.path.name[:11], b.start, b.count) for b in blocks] == [
        ("train-00001", 10, 4), ("train-00001", 14, 2), ("train-00002", 0, 4),
        ("train-00002", 4, 4), ("train-00002", 8, 4), ("train-00002", 12, 4),
        ("train-00003", 0, 4), ("train-00003", 4, 1)]


def test_more_ranks_than_pairs_is_one_line(five_shards):
    with pytest.raises(DataError, match="81 ranks but only 80 training pairs") as err:
        read_prepared(five_shards).rank_blocks(81, 0, 4)
    assert "\n" not in str(err.value)
