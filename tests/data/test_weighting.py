"""data.oversample: the train pairs of named sources repeated K times, bad settings refused."""
import pytest

from tf_nmt.config import ConfigError, load_config
from tf_nmt.data.weighting import check_oversample, load_train_pairs, split_sources

TRAIN = [("a", "A", "ding"), ("b", "B", "gcc"), ("c", "C", "ding"), ("d", "D", "lo_ui")]


def write_corpus(root, train=TRAIN, meta=True):
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    rows = {"train": train, "dev": train[:2], "test": train[2:]}
    for split, items in rows.items():
        (corpus / f"{split}.en").write_text("".join(f"{en}\n" for en, _, _ in items))
        (corpus / f"{split}.de").write_text("".join(f"{de}\n" for _, de, _ in items))
        if meta:
            (corpus / f"{split}.meta.tsv").write_text("".join(f"{s}\tg\n" for _, _, s in items))
    return root


def test_named_sources_are_repeated_in_place_and_others_kept_once(tmp_path):
    data = write_corpus(tmp_path / "data")
    assert split_sources(data, "train") == ["ding", "gcc", "ding", "lo_ui"]
    assert load_train_pairs(data, {}) == [("a", "A"), ("b", "B"), ("c", "C"), ("d", "D")]
    assert load_train_pairs(data, {"ding": 3, "lo_ui": 2}) == [
        ("a", "A")] * 3 + [("b", "B")] + [("c", "C")] * 3 + [("d", "D")] * 2


def test_a_source_the_corpus_lacks_is_refused_with_the_sources_it_has(tmp_path):
    data = write_corpus(tmp_path / "data")
    with pytest.raises(ConfigError, match=r"'handbook'.*its sources: ding, gcc, lo_ui"):
        load_train_pairs(data, {"handbook": 2})


def test_a_corpus_without_sources_or_with_misaligned_ones_is_refused(tmp_path):
    plain = write_corpus(tmp_path / "plain", meta=False)
    assert len(load_train_pairs(plain, {})) == 4  # no per-source option: no meta needed
    with pytest.raises(ConfigError, match="train.meta.tsv is missing"):
        load_train_pairs(plain, {"ding": 2})
    short = write_corpus(tmp_path / "short")
    (short / "corpus" / "train.meta.tsv").write_text("ding\tg\n")
    with pytest.raises(ConfigError, match="1 lines for 4 train pairs"):
        load_train_pairs(short, {"ding": 2})


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "3"])
def test_repeat_counts_must_be_positive_integers(value):
    with pytest.raises(ConfigError, match="integer >= 1"):
        check_oversample({"ding": value})


def test_the_option_parses_from_an_override_and_is_not_shared_between_configs():
    cfg = load_config(None, ["data.oversample={ding: 3}"])
    assert cfg.data.oversample == {"ding": 3}
    other = load_config(None, [], base=cfg)
    other.data.oversample["gcc"] = 2
    assert cfg.data.oversample == {"ding": 3}
    with pytest.raises(ConfigError, match="expected dict"):
        load_config(None, ["data.oversample=3"])


def toy_corpus_with_sources(root):
    """The toy data dir of tests.helpers with every third train pair from "ding", the rest "gcc"."""
    from tests.helpers import write_toy_data_dir

    data = write_toy_data_dir(root, repeats=1)
    n = len((data / "corpus" / "train.en").read_text().splitlines())
    sources = ["ding" if i % 3 == 0 else "gcc" for i in range(n)]
    (data / "corpus" / "train.meta.tsv").write_text("".join(f"{s}\tg\n" for s in sources))
    return data, sources


@pytest.mark.parametrize("override, message", [
    ("data.oversample={handbook: 2}", "does not have; its sources: ding, gcc"),
])
def test_the_trainer_refuses_before_the_run_directory_is_written(tmp_path, override, message):
    from tests.training.test_async_trainer import TINY
    from tf_nmt.training.trainer import train

    data, _ = toy_corpus_with_sources(tmp_path / "data")
    cfg = load_config(None, TINY + [f"data.data_dir={data}", override])
    with pytest.raises(ConfigError, match=message):
        train(cfg, tmp_path / "run", log=lambda _m: None)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_training_reads_the_oversampled_split(tmp_path):
    from tests.training.test_async_trainer import TINY
    from tf_nmt.training.trainer import train

    data, sources = toy_corpus_with_sources(tmp_path / "data")
    lines = []
    cfg = load_config(None, TINY + ["train.train_steps=3", f"data.data_dir={data}",
                                    "data.oversample={ding: 4}"])
    result = train(cfg, tmp_path / "run", log=lines.append)
    assert result.final_step == 3
    expected = len(sources) + 3 * sources.count("ding")
    assert any(f"{expected:,} train pairs" in line for line in lines), lines
