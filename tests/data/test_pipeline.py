"""tf.data pipeline: token budget per batch, length filter, specials, sharding."""
import numpy as np
import pytest

from tests.helpers import toy_pairs
from tf_nmt.compat import tf
from tf_nmt.data.pipeline import EncodedCorpus, bucket_plan, encode_corpus, make_dataset, make_source_batches
from tf_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, SubwordTokenizer, train_sentencepiece


def random_corpus(n=600, max_len=60, seed=0) -> EncodedCorpus:
    rng = np.random.default_rng(seed)
    src = [list(rng.integers(4, 50, size=rng.integers(1, max_len))) for _ in range(n)]
    tgt = [list(rng.integers(4, 50, size=rng.integers(1, max_len))) for _ in range(n)]
    return EncodedCorpus(tf.ragged.constant(src, dtype=tf.int32), tf.ragged.constant(tgt, dtype=tf.int32))


@pytest.mark.parametrize("batch_tokens,max_length,width",
                         [(256, 40, 0), (1000, 70, 0), (64, 63, 0), (1000, 70, 1), (256, 40, 3)])
def test_every_batch_respects_the_token_budget(batch_tokens, max_length, width):
    ds = make_dataset(random_corpus(), batch_tokens=batch_tokens, max_length=max_length,
                      shuffle=True, repeat=False, seed=1, bucket_width=width)
    seen = 0
    for inputs, target_out in ds:
        b, s = inputs["source"].shape
        t = inputs["target_in"].shape[1]
        assert b * max(s, t) <= batch_tokens
        assert s <= max_length and t <= max_length
        assert target_out.shape == inputs["target_in"].shape
        seen += b
    assert seen > 0


def test_width_one_buckets_pad_less_and_fill_the_budget():
    """Width-1 buckets: every pair of a batch has the same longer side, so that side is never
    padded, and more real tokens fit the budget than with the geometric buckets."""
    corpus = random_corpus(n=2000, max_len=60)

    def real_fraction(width):
        real = padded = 0
        for inputs, target_out in make_dataset(corpus, batch_tokens=1000, max_length=70,
                                               shuffle=True, repeat=False, seed=2,
                                               bucket_width=width):
            src, tgt = inputs["source"].numpy(), target_out.numpy()
            longer = np.maximum((src != PAD_ID).sum(1), (tgt != PAD_ID).sum(1))
            if width == 1:
                assert len(set(longer.tolist())) == 1
            real += int((src != PAD_ID).sum() + (tgt != PAD_ID).sum())
            padded += src.size + tgt.size
        return real / padded

    assert real_fraction(1) > real_fraction(0) + 0.02


def test_bucket_plans():
    assert bucket_plan(1000, 10, 1) == ([2, 3, 4, 5, 6, 7, 8, 9, 10],
                                        [1000, 500, 333, 250, 200, 166, 142, 125, 111, 90])
    assert bucket_plan(1000, 10, 4) == ([5, 9], [250, 125, 90])
    assert bucket_plan(1000, 30)[0] == [8, 12, 16, 20, 25]
    with pytest.raises(ValueError, match="bucket width"):
        bucket_plan(1000, 10, -1)


def test_length_filter_drops_only_long_pairs():
    corpus = random_corpus(n=300, max_len=60)
    max_length = 30
    expected = sum(1 for s, t in zip(corpus.source.to_list(), corpus.target.to_list())
                   if len(s) + 1 <= max_length and len(t) + 1 <= max_length)
    ds = make_dataset(corpus, batch_tokens=512, max_length=max_length, shuffle=False, repeat=False)
    assert sum(int(x["source"].shape[0]) for x, _ in ds) == expected


def test_specials_and_padding():
    corpus = EncodedCorpus(tf.ragged.constant([[5, 6, 7], [8]], dtype=tf.int32),
                           tf.ragged.constant([[9, 10], [11, 12, 13]], dtype=tf.int32))
    (inputs, target_out), = list(make_dataset(corpus, batch_tokens=64, max_length=10,
                                                shuffle=False, repeat=False))
    rows = {tuple(r) for r in inputs["source"].numpy().tolist()}
    assert rows == {(5, 6, 7, EOS_ID), (8, EOS_ID, PAD_ID, PAD_ID)}
    by_first = {tuple(r)[1]: (tuple(r), tuple(o)) for r, o in
                zip(inputs["target_in"].numpy().tolist(), target_out.numpy().tolist())}
    assert by_first[9] == ((BOS_ID, 9, 10, PAD_ID), (9, 10, EOS_ID, PAD_ID))
    assert by_first[11] == ((BOS_ID, 11, 12, 13), (11, 12, 13, EOS_ID))


def test_shards_are_disjoint_and_complete():
    n = 101  # each source row is unique: [id, id]
    corpus = EncodedCorpus(tf.ragged.constant([[i + 4, i + 4] for i in range(n)], dtype=tf.int32),
                           tf.ragged.constant([[5]] * n, dtype=tf.int32))
    seen = []
    for index in range(3):
        ds = make_dataset(corpus, batch_tokens=512, max_length=20, shuffle=False, repeat=False,
                          num_shards=3, shard_index=index)
        rows = [tuple(r[r != PAD_ID]) for x, _ in ds for r in x["source"].numpy()]
        seen.append(set(rows))
    assert sum(map(len, seen)) == n
    assert not (seen[0] & seen[1]) and not (seen[1] & seen[2]) and not (seen[0] & seen[2])
    everything = {tuple(s) + (EOS_ID,) for s in corpus.source.to_list()}
    assert seen[0] | seen[1] | seen[2] == everything


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="more data shards"):
        make_dataset(random_corpus(n=3), num_shards=4, shard_index=0)
    with pytest.raises(ValueError, match="batch_tokens"):
        bucket_plan(batch_tokens=10, max_length=100)
    with pytest.raises(ValueError, match="invalid shard"):
        make_dataset(random_corpus(n=10), num_shards=2, shard_index=2)


def test_encode_corpus_and_inference_batches():
    pairs = toy_pairs()
    tok = SubwordTokenizer(train_sentencepiece([s for p in pairs for s in p] * 3, vocab_size=400))
    corpus = encode_corpus(pairs, tok, chunk=7)
    assert len(corpus) == len(pairs)
    assert tok.decode(corpus.source.to_list()) == [e for e, _ in pairs]
    batches = list(make_source_batches(corpus.source, batch_size=16))
    assert sum(int(b.shape[0]) for b in batches) == len(pairs)
    assert all(int(tf.reduce_max(tf.reduce_sum(tf.cast(b == EOS_ID, tf.int32), 1))) == 1 for b in batches)
    with pytest.raises(ValueError, match="empty corpus"):
        encode_corpus([], tok)
