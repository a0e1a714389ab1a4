"""Training on an own corpus (en->fr, streamed from shards): the run records its languages and
the manifest's vocabulary, resumes exactly, and refuses what it cannot honour before writing."""
import json

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # each test trains a (tiny) model for real

from tests.data.own_corpus_fixture import write_own_corpus
from tf_nmt.compat import KERAS3
from tf_nmt.config import ConfigError, load_config
from tf_nmt.data.prepared import DataError
from tf_nmt.run_dir import RunDirError, load_trained_model
from tf_nmt.training.trainer import train

TINY = ["model.kind=transformer", "model.num_layers=1", "model.d_model=32", "model.num_heads=2",
        "model.ff_dim=64", "model.dropout=0.0", "data.batch_tokens=256",
        "data.shuffle_buffer=64", "train.peak_lr=0.003", "train.warmup_steps=10",
        "train.log_every=2", "train.seed=7", "train.steps_per_cycle=4"]


def config(data_dir, *extra):
    return load_config(None, TINY + [f"data.data_dir={data_dir}", *extra])


def quiet(_msg):
    pass


@pytest.fixture(scope="module")
def en_fr(tmp_path_factory):
    return write_own_corpus(tmp_path_factory.mktemp("en-fr"), num_shards=4)


def weights(run_dir):
    model, _, _ = load_trained_model(run_dir)
    return [w.copy() for w in model.get_weights()]


def test_interrupted_run_resumes_exactly_and_records_the_corpus(en_fr, tmp_path):
    straight, split = tmp_path / "straight", tmp_path / "split"
    whole = train(config(en_fr, "train.train_steps=8"), straight, log=quiet)
    first = train(config(en_fr, "train.train_steps=4"), split, log=quiet)
    second = train(config(en_fr, "train.train_steps=8"), split, log=quiet)
    assert (first.final_step, second.resumed_from, second.final_step) == (4, 4, 8)
    # the resumed run saw the batches the uninterrupted one saw next: same losses, same weights
    losses = {h["step"]: h["loss"] for h in first.history + second.history}
    assert sorted(losses) == [h["step"] for h in whole.history] == [2, 4, 6, 8]
    np.testing.assert_allclose([losses[h["step"]] for h in whole.history],
                               [h["loss"] for h in whole.history], rtol=1e-5)
    for x, y in zip(weights(straight), weights(split)):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
    meta = json.loads((split / "meta.json").read_text())
    manifest = json.loads((en_fr / "corpus" / "manifest.json").read_text())
    assert meta["languages"] == ["en", "fr"]
    assert meta["vocab_fingerprint"] == manifest["vocab"]["fingerprint"]
    assert (split / "vocab.model").read_bytes() == (en_fr / manifest["vocab"]["path"]).read_bytes()
    assert "vocab_size: 320" in (split / "config.yaml").read_text()  # the manifest's size


def test_resume_with_another_language_pair_is_refused(en_fr, tmp_path):
    """fr->en with the very same vocabulary: only the languages tell the runs apart."""
    run = tmp_path / "run"
    train(config(en_fr, "train.train_steps=2"), run, log=quiet)
    before = (run / "meta.json").read_bytes(), sorted(p.name for p in (run / "checkpoints").iterdir())
    spm = (en_fr / "vocab" / "spm-320.model").read_bytes()
    fr_en = write_own_corpus(tmp_path / "fr-en", src_lang="fr", tgt_lang="en", spm_proto=spm)
    with pytest.raises(RunDirError, match="trained on en-fr but this data dir is fr-en") as err:
        train(config(fr_en, "train.train_steps=4"), run, log=quiet)
    assert "\n" not in str(err.value)
    after = (run / "meta.json").read_bytes(), sorted(p.name for p in (run / "checkpoints").iterdir())
    assert before == after


def test_what_an_own_corpus_cannot_honour_is_refused_before_the_run_dir(en_fr, tmp_path):
    run = tmp_path / "run"
    with pytest.raises(ConfigError, match="data.vocab_size=8000.*320-piece"):
        train(config(en_fr, "data.vocab_size=8000", "train.train_steps=2"), run, log=quiet)
    with pytest.raises(ConfigError, match="data.oversample cannot be used with the own corpus"):
        train(config(en_fr, "data.oversample={ding: 2}", "train.train_steps=2"), run, log=quiet)
    broken = write_own_corpus(tmp_path / "broken", num_shards=2, repeats=1,
                              spm_proto=(en_fr / "vocab" / "spm-320.model").read_bytes())
    shard = sorted((broken / "shards").iterdir())[1]
    shard.write_bytes(shard.read_bytes()[:-3])
    with pytest.raises(DataError, match="truncated") as err:
        train(config(broken, "train.train_steps=2"), run, log=quiet)
    assert "\n" not in str(err.value)
    assert not run.exists()
    # the manifest's size given explicitly is fine
    assert train(config(en_fr, "data.vocab_size=320", "train.train_steps=2"), run,
                 log=quiet).final_step == 2


def test_train_async_refuses_an_own_corpus_in_one_line(en_fr, tmp_path):
    from tf_nmt.training.async_trainer import train_nmt_async

    # on Keras 3 train-async is refused first, before it reads the data dir
    error, says = ((ConfigError, "train-async runs on Keras 2 only") if KERAS3 else
                   (DataError, "train-async holds the built-in corpus in memory"))
    with pytest.raises(error, match=says) as err:
        train_nmt_async(load_config(None, [f"data.data_dir={en_fr}"]), tmp_path / "run",
                        workers=1, log=quiet)
    assert "\n" not in str(err.value) and not (tmp_path / "run").exists()
