"""Streaming an own corpus's shards (tf_nmt.data.streaming): the same batches as the in-memory
pipeline makes, a rank stream's window batches, one-line shard errors (ranks' shares:
test_rank_shares.py)."""
import numpy as np
import pytest

from tests.data.own_corpus_fixture import shard_pairs, write_own_corpus
from tf_nmt.data.pipeline import EncodedCorpus, bucket_plan, make_dataset
from tf_nmt.data.prepared import DataError, read_prepared
from tf_nmt.data.streaming import make_shard_dataset, read_pairs, window_plan
from tf_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from tf_nmt.compat import tf


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_own_corpus(tmp_path_factory.mktemp("own"), num_shards=4, repeats=1)


def batch_pairs_of(batch):
    """(source ids, target ids) of each row of a batch, specials and padding stripped."""
    inputs, target_out = batch
    out = []
    for src, tgt_in, tgt_out in zip(inputs["source"].numpy(), inputs["target_in"].numpy(),
                                    target_out.numpy()):
        src = [int(i) for i in src if i != PAD_ID]
        tgt = [int(i) for i in tgt_out if i != PAD_ID]
        assert src[-1] == EOS_ID and tgt[-1] == EOS_ID and tgt_in[0] == BOS_ID
        assert [int(i) for i in tgt_in if i != PAD_ID] == [BOS_ID] + tgt[:-1]
        out.append((tuple(src[:-1]), tuple(tgt[:-1])))
    return out


def same_batches(a, b):
    assert len(a) == len(b)
    for (xa, ya), (xb, yb) in zip(a, b):
        for ta, tb in ((xa["source"], xb["source"]), (xa["target_in"], xb["target_in"]), (ya, yb)):
            np.testing.assert_array_equal(ta.numpy(), tb.numpy())


@pytest.mark.parametrize("batch_tokens,max_length,width", [(64, 12, 1), (128, 20, 0), (96, 16, 3)])
def test_batches_respect_the_token_budget_and_buckets(data_dir, batch_tokens, max_length, width):
    files = read_prepared(data_dir).shard_paths()
    kept = sum(1 for s, t in shard_pairs(data_dir) if max(len(s), len(t)) + 1 <= max_length)
    seen = 0
    for inputs, target_out in make_shard_dataset(files, batch_tokens, max_length, repeat=False,
                                                 seed=3, shuffle_buffer=32, bucket_width=width):
        b, s = inputs["source"].shape
        t = inputs["target_in"].shape[1]
        assert b * max(s, t) <= batch_tokens and s <= max_length and t <= max_length
        if width == 1:  # every pair of the batch has the same longer side
            src, tgt = inputs["source"].numpy(), target_out.numpy()
            longer = np.maximum((src != PAD_ID).sum(1), (tgt != PAD_ID).sum(1))
            assert len(set(longer.tolist())) == 1
        seen += b
    if max_length == 12:  # the filter has something to drop
        assert kept < len(shard_pairs(data_dir))
    assert seen == kept  # the length filter drops exactly the long pairs


def test_streamed_batches_are_the_in_memory_pipelines_batches(data_dir):
    """Unshuffled, one shard streams the very batches make_dataset makes of its pairs."""
    files = read_prepared(data_dir).shard_paths()[:1]
    records = [p for p in shard_pairs(data_dir)][: read_prepared(data_dir).shards[0].pairs]
    corpus = EncodedCorpus(tf.ragged.constant([list(s) for s, _ in records], dtype=tf.int32),
                           tf.ragged.constant([list(t) for _, t in records], dtype=tf.int32))
    same_batches(list(make_shard_dataset(files, 64, 16, shuffle=False, repeat=False,
                                         bucket_width=1)),
                 list(make_dataset(corpus, 64, 16, shuffle=False, repeat=False, bucket_width=1)))


def test_each_epoch_reshuffles_the_file_order_from_the_seed(data_dir):
    files = read_prepared(data_dir).shard_paths()

    def firsts(seed):  # the first pair of each of 6 epochs (no pair shuffle: file order shows)
        ds = read_pairs(files, shuffle=True, seed=seed, cycle_length=1).repeat(6)
        pairs = [(tuple(s.numpy()), tuple(t.numpy())) for s, t in ds]
        per = len(pairs) // 6
        return [pairs[i * per] for i in range(6)]

    assert firsts(1) == firsts(1)
    assert len(set(firsts(1))) > 1


def test_missing_or_truncated_shard_is_one_line(tmp_path):
    root = write_own_corpus(tmp_path / "own", num_shards=3, repeats=1)
    shard = root / "shards" / read_prepared(root).shards[1].name
    shard.write_bytes(shard.read_bytes()[:-5])
    with pytest.raises(DataError, match="truncated") as err:
        read_prepared(root).rank_blocks(1, 0, 8)
    assert "\n" not in str(err.value) and shard.name in str(err.value)
    shard.unlink()
    with pytest.raises(DataError, match="missing") as err:
        read_prepared(root).rank_blocks(2, 1, 8)
    assert "\n" not in str(err.value) and shard.name in str(err.value)


@pytest.mark.parametrize("width", [0, 1])
def test_a_window_is_batched_within_budget_with_few_part_filled_batches(width):
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(1, 40, 3000), rng.integers(1, 40, 3000)
    batch_tokens, max_length = 512, 32
    boundaries, sizes = bucket_plan(batch_tokens, max_length, width)
    order, first, end = window_plan(src, tgt, batch_tokens, max_length, width, (1, 2, 3))
    longer = np.maximum(src, tgt) + 1
    kept = np.flatnonzero(np.maximum(src, tgt) + 1 <= max_length)
    assert sorted(order.tolist()) == kept.tolist()  # every pair that fits, once
    part_filled = 0
    for a, b in zip(first, end):
        rows = order[a:b]
        assert len(rows) * longer[rows].max() <= batch_tokens
        buckets = set(np.searchsorted(boundaries, longer[rows], side="right").tolist())
        part_filled += len(buckets) > 1 or len(rows) < sizes[buckets.pop()]
    per_bucket = np.bincount(np.searchsorted(boundaries, longer[kept], side="right"))
    left = sum(n % size for n, size in zip(per_bucket, sizes))  # pairs not in a full batch
    assert part_filled <= -(-left * max_length // batch_tokens) + 1  # packed, not one per bucket
    again = window_plan(src, tgt, batch_tokens, max_length, width, (1, 2, 3))
    assert all(np.array_equal(x, y) for x, y in zip(again, (order, first, end)))
    other = window_plan(src, tgt, batch_tokens, max_length, width, (1, 2, 4))[0]
    assert not np.array_equal(other, order)  # the batch order is drawn from the seed
