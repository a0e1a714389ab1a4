"""The resume guard of a run directory (tf_nmt.run_dir): world size, model, vocabulary,
languages."""
import pytest

from tf_nmt.compat import KERAS_VERSION
from tf_nmt.run_dir import RunDir, RunDirError, check_resume

# "keras": this process's Keras, as run_meta records it (a run of the other Keras is refused first)
META = {"vocab_fingerprint": "abc", "vocab_size": 320, "model_kind": "transformer",
        "model_hparams": {"d_model": 16}, "world_size": 2, "keras": KERAS_VERSION}


def saved_run(tmp_path, **changes):
    run = RunDir(tmp_path / "run")
    run.root.mkdir()
    run.write_meta({**META, **changes})
    return run


def test_fresh_directory_is_not_a_resume(tmp_path):
    assert check_resume(RunDir(tmp_path / "new"), META) is False


def test_same_meta_resumes_when_a_checkpoint_exists(tmp_path):
    run = saved_run(tmp_path)
    assert check_resume(run, META) is False  # meta but no checkpoint yet
    run.checkpoints.mkdir()
    (run.checkpoints / "checkpoint").write_text("x")
    assert check_resume(run, META) is True


def test_other_world_size_is_refused_with_a_clear_message(tmp_path):
    run = saved_run(tmp_path, world_size=4)
    before = run.meta_path.read_bytes()
    with pytest.raises(RunDirError) as err:
        check_resume(run, META)
    msg = str(err.value)
    assert "written by 4 worker(s) but this run has 2" in msg and "--allow-world-size-change" in msg
    assert run.meta_path.read_bytes() == before  # nothing written
    assert check_resume(run, META, allow_world_size_change=True) is False


@pytest.mark.parametrize("key,value,match", [("vocab_fingerprint", "zzz", "vocabulary"),
                                             ("model_kind", "gnmt", "model_kind"),
                                             ("model_hparams", {"d_model": 32}, "model_hparams")])
def test_other_vocabulary_or_model_is_refused(tmp_path, key, value, match):
    with pytest.raises(RunDirError, match=match):
        check_resume(saved_run(tmp_path, **{key: value}), META)


def test_checkpoints_without_meta_are_refused(tmp_path):
    run = RunDir(tmp_path / "run")
    run.checkpoints.mkdir(parents=True)
    (run.checkpoints / "checkpoint").write_text("x")
    with pytest.raises(RunDirError, match="no meta.json"):
        check_resume(run, META)


def test_a_corrupt_checkpoint_is_a_run_dir_error(tmp_path):
    """Truncated checkpoint data must give one clear error, not a traceback from the reader."""
    from tests.helpers import toy_pairs
    from tf_nmt.config import Config
    from tf_nmt.data.tokenizer import SubwordTokenizer, train_sentencepiece
    from tf_nmt.compat import tf
    from tf_nmt.run_dir import build_initialised_model, load_trained_model, run_meta

    cfg = Config()
    cfg.model.hparams = {"num_layers": 1, "d_model": 16, "num_heads": 2, "ff_dim": 32}
    tokenizer = SubwordTokenizer(train_sentencepiece([t for p in toy_pairs() for t in p] * 10, 300))
    run = RunDir(tmp_path / "run")
    run.root.mkdir()
    cfg.save(run.config_path)
    tokenizer.save(run.vocab_path)
    run.write_meta(run_meta(cfg, tokenizer, 1))  # as the trainer writes it: this process's Keras
    model = build_initialised_model("transformer", tokenizer.vocab_size, cfg.model.hparams)
    prefix = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(run.checkpoints), 1).save()
    assert load_trained_model(run.root)[0] is not None
    data = sorted(run.checkpoints.glob("ckpt-*.data-*"))[0]
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 3])
    with pytest.raises(RunDirError, match=f"cannot restore checkpoint {prefix}"):
        load_trained_model(run.root)


def test_other_languages_are_refused_and_old_runs_count_as_en_de(tmp_path):
    """meta.json records the data dir's languages; a run from before they were recorded trained
    the built-in en-de corpus."""
    old = saved_run(tmp_path)  # no "languages" key
    assert old.languages() == ("en", "de")
    assert check_resume(old, {**META, "languages": ["en", "de"]}) is False
    with pytest.raises(RunDirError, match="trained on en-de but this data dir is en-fr") as err:
        check_resume(old, {**META, "languages": ["en", "fr"]})
    assert "\n" not in str(err.value)
    (tmp_path / "other").mkdir()
    fr_en = saved_run(tmp_path / "other", languages=["fr", "en"])
    assert fr_en.languages() == ("fr", "en")
    with pytest.raises(RunDirError, match="trained on fr-en but this data dir is en-fr"):
        check_resume(fr_en, {**META, "languages": ["en", "fr"]})


@pytest.mark.parametrize("saved, now, match", [
    ("s1", None, "a separate source vocabulary s1 but this data dir has one vocabulary shared"),
    (None, "s1", "one vocabulary shared by source and target but this data dir has a separate"),
    ("s1", "s2", "separate source vocabulary s1 but this data dir has a separate source "
                 "vocabulary s2")])
def test_another_vocabulary_mode_or_source_vocabulary_is_refused(tmp_path, saved, now, match):
    """Same target vocabulary: only the source side (shared, or which separate one) differs;
    a run from before separate vocabularies (no key) is a shared one."""
    run = saved_run(tmp_path, **({} if saved is None else {"source_vocab_fingerprint": saved}))
    with pytest.raises(RunDirError, match=match):
        check_resume(run, {**META, "source_vocab_fingerprint": now})
    assert check_resume(run, {**META, "source_vocab_fingerprint": saved}) is False
