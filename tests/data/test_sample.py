"""The one builder of real batches for timed steps outside training (probe and studies)."""
import numpy as np
import pytest

from tests.helpers import write_toy_data_dir


def toy_config(tmp_path, **data):
    from tf_nmt.config import load_config
    from tf_nmt.data.data_dir import ensure_vocab

    root = write_toy_data_dir(tmp_path / "data", repeats=1)
    cfg = load_config(None, [f"data.data_dir={root}", "data.vocab_size=320",
                             "data.batch_tokens=128", "data.max_length=24"] + [f"data.{k}={v}" for k, v in data.items()])
    ensure_vocab(root, 320, log=lambda _m: None)
    return cfg


def sentences(batches):
    """The distinct source sentences (token ids without padding) in ``batches``."""
    return {tuple(int(t) for t in row if t != 0)
            for features, _labels in batches for row in np.asarray(features["source"])}


def test_ranks_get_disjoint_shards_of_one_seeded_sample_batched_within_the_budget(tmp_path):
    from tf_nmt.data.sample import sample_batches

    cfg = toy_config(tmp_path)
    _, rank0 = sample_batches(cfg.data, 6, pairs_per_rank=20, rank=0, size=2)
    _, rank1 = sample_batches(cfg.data, 6, pairs_per_rank=20, rank=1, size=2)
    _, again = sample_batches(cfg.data, 6, pairs_per_rank=20, rank=0, size=2)
    assert len(rank0) == len(rank1) == 6
    for (f, labels), (g, same) in zip(rank0, again):  # seeded: the same batches again
        np.testing.assert_array_equal(f["source"], g["source"])
        np.testing.assert_array_equal(labels, same)
    for features, labels in rank0 + rank1:  # the trainer's token budget per batch
        assert np.asarray(features["source"]).size <= 128 and np.asarray(labels).size <= 128
    # 40 of the 60 distinct train pairs sampled, 20 per rank: the shards never share a sentence
    first, second = sentences(rank0), sentences(rank1)
    assert 0 < len(first) <= 20 and 0 < len(second) <= 20 and not first & second


def test_bad_arguments_and_a_missing_vocabulary_are_refused(tmp_path):
    from tf_nmt.data.sample import sample_batches

    cfg = toy_config(tmp_path)
    with pytest.raises(ValueError, match="0 <= rank < size"):
        sample_batches(cfg.data, 2, pairs_per_rank=10, rank=2, size=2)
    with pytest.raises(ValueError, match="count >= 1"):
        sample_batches(cfg.data, 0, pairs_per_rank=10)
    cfg.data.vocab_size = 400
    with pytest.raises(FileNotFoundError, match="--vocab-size 400"):
        sample_batches(cfg.data, 2, pairs_per_rank=10)


def test_the_sample_is_drawn_from_the_oversampled_pair_list(tmp_path):
    from tf_nmt.config import ConfigError
    from tf_nmt.data.sample import sample_batches
    from tf_nmt.data.tokenizer import EOS_ID, SubwordTokenizer
    from tf_nmt.data.data_dir import vocab_path

    cfg = toy_config(tmp_path)
    corpus = tmp_path / "data" / "corpus"
    english = (corpus / "train.en").read_text().splitlines()
    sources = ["ding" if i % 3 == 0 else "gcc" for i in range(len(english))]
    (corpus / "train.meta.tsv").write_text("".join(f"{s}\tg\n" for s in sources))
    tokenizer = SubwordTokenizer.load(vocab_path(tmp_path / "data", 320))
    ding = {tuple(tokenizer.tokenize([e]).to_list()[0]) + (EOS_ID,)
            for e, s in zip(english, sources) if s == "ding"}

    def ding_share(batches):  # the share of sampled rows that are Ding sentences
        rows = [tuple(int(t) for t in row if t != 0)
                for features, _labels in batches for row in np.asarray(features["source"])]
        return sum(row in ding for row in rows) / len(rows)

    _, plain = sample_batches(cfg.data, 4, pairs_per_rank=30)
    cfg.data.oversample = {"ding": 50}
    _, weighted = sample_batches(cfg.data, 4, pairs_per_rank=30)
    # a third of the pairs are Ding; 50 copies make them 1000 of 1040
    assert ding_share(plain) < 0.5 < 0.75 < ding_share(weighted)
    cfg.data.oversample = {"handbook": 2}
    with pytest.raises(ConfigError, match="its sources: ding, gcc"):
        sample_batches(cfg.data, 2, pairs_per_rank=10)
