"""What the quickstart scores and exports (toy corpus, tiny model): the EMA of its last
checkpoint's weights (the Transformer recipe's train.ema_decay), or, on raw weights, the average
of its last checkpoints."""
import json
import os

import numpy as np
import pytest

import tf_nmt.commands.prepare as prepare
import tf_nmt.commands.quickstart as quickstart
from tests.helpers import write_toy_data_dir
from tests.training.test_trainer import TINY
from tf_nmt.compat import keras_name
from tf_nmt.config import QUICKSTART_EMA_DECAY
from tf_nmt.errors import UsageError
from tf_nmt.inference.formats import EXPORT_WEIGHTS_RECORD

# a step limit instead of the time budget (which a loaded machine would make train too few steps
# for 3 checkpoints); the record says which ended training
SHORT = TINY + ["data.oversample={}", "train.steps_per_cycle=5", "train.keep_checkpoints=3",
                "train.train_steps=20", "train.time_budget_minutes=0"]


def _quickstart(tmp_path, monkeypatch, overrides, **kw):
    data = write_toy_data_dir(tmp_path / "data")
    monkeypatch.setattr(prepare, "prepare_corpus", lambda *a, **k: {})  # the toy corpus is it
    run, export = tmp_path / "run", tmp_path / "export"
    payload = quickstart.run_quickstart(data, run, export, precision="float32",
                                        overrides=SHORT + overrides, **kw)
    return run, export, payload


def _exported_variables(export):
    """The float variables of a SavedModel export, as sorted flat sums per shape: enough to tell
    which of two sets of model weights it holds."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(export / "variables" / "variables"))
    values = [reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
              if name.endswith("VARIABLE_VALUE")]
    return sorted((v.shape, round(float(np.sum(v.astype(np.float64))), 4))
                  for v in values if v.dtype.kind == "f")


def _model_variables(model):
    return sorted((tuple(w.shape), round(float(np.sum(w.astype(np.float64))), 4))
                  for w in model.get_weights())


@pytest.mark.slow
def test_quickstart_scores_and_exports_the_ema_of_its_last_checkpoint(tmp_path, monkeypatch):
    from tf_nmt.run_dir import load_trained_model
    from tf_nmt.training.checkpoints import list_checkpoints

    run, export, payload = _quickstart(tmp_path, monkeypatch, [])
    kept = list_checkpoints(run / "checkpoints")
    assert len(kept) == 3 and payload["training"]["steps"] == 20
    assert 0 < payload["training"]["cores_busy"] <= os.cpu_count() + 0.1
    assert payload["training"]["time_budget_minutes"] == 0
    assert payload["training"]["step_limit"] == 20
    # the recipe keeps an EMA; the record (in the run directory) says its weights were scored,
    # the last checkpoint alone, the raw weights' BLEU beside them
    record = json.loads((run / quickstart.RECORD_NAME).read_text())
    assert record["weights"] == "ema" and record["ema_decay"] == QUICKSTART_EMA_DECAY
    assert record["keras"] == keras_name()  # which Keras it ran on
    assert record["checkpoint_average"]["asked"] == 1
    assert record["checkpoint_average"]["averaged"] == kept[-1:]
    assert isinstance(record["checkpoint_average"]["last_checkpoint_bleu"], float)
    assert not (run / "averaged").exists()
    # the export holds the EMA weights (at step 20 the EMA, decay (1+s)/(10+s), is far from
    # the raw weights) and says so
    ema, _, _ = load_trained_model(run, weights="ema")
    raw, _, _ = load_trained_model(run, weights="raw")
    assert _exported_variables(export) == _model_variables(ema) != _model_variables(raw)
    said = json.loads((export / EXPORT_WEIGHTS_RECORD).read_text())
    assert said["weights"] == "ema" and said["averaged"] == kept[-1:]
    assert len(payload["export"]["fresh_process_samples"]) == len(quickstart.SAMPLE_SENTENCES)

    # --average-last K on an EMA run averages the EMA weights of the last K checkpoints
    averaged = quickstart.average_last_checkpoints(run, 3, "ema")
    assert averaged["prefixes"] == kept
    got, _, _ = load_trained_model(run, averaged["checkpoint"])
    each = [load_trained_model(run, p, "ema")[0].get_weights() for p in kept]
    for g, *ws in zip(got.get_weights(), *each):
        np.testing.assert_allclose(g, np.mean(np.stack(ws).astype(np.float64), 0), atol=1e-6)


@pytest.mark.slow
def test_without_ema_the_quickstart_averages_its_last_checkpoints(tmp_path, monkeypatch):
    from tf_nmt.run_dir import load_trained_model
    from tf_nmt.training.checkpoints import list_checkpoints

    # the default for raw weights is the last 5, at most the checkpoints the run keeps (3)
    run, export, payload = _quickstart(tmp_path, monkeypatch, ["train.ema_decay=0"])
    kept = list_checkpoints(run / "checkpoints")
    assert payload["weights"] == "raw" and payload["ema_decay"] == 0
    record = payload["checkpoint_average"]
    assert record["asked"] == 3 and record["averaged"] == kept and len(kept) == 3
    # the averaged checkpoint holds the mean of the kept ones, and it is what was exported
    averaged, _, _ = load_trained_model(run, str(run / "averaged"))
    each = [load_trained_model(run, p)[0].get_weights() for p in kept]
    for got, *ws in zip(averaged.get_weights(), *each):
        np.testing.assert_allclose(got, np.mean(np.stack(ws).astype(np.float64), 0), atol=1e-6)
    assert (run / "averaged" / "averaged_from.txt").read_text().split() == kept
    assert _exported_variables(export) == _model_variables(averaged)
    assert json.loads((export / EXPORT_WEIGHTS_RECORD).read_text())["weights"] == "raw"


def test_average_last_beyond_the_kept_checkpoints_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(UsageError, match="--average-last 6: use 1 .* train.keep_checkpoints \\(5\\)"):
        quickstart.run_quickstart(tmp_path / "data", tmp_path / "run", tmp_path / "e",
                                  tmp_path / "r.json", average_last=6)
    with pytest.raises(UsageError, match="--average-last 0"):
        quickstart.run_quickstart(tmp_path / "data", tmp_path / "run", tmp_path / "e",
                                  tmp_path / "r.json", average_last=0)
    assert not (tmp_path / "run").exists() and not (tmp_path / "data").exists()


def test_the_quickstart_transformer_keeps_an_ema_and_gnmt_small_does_not(tmp_path):
    from tf_nmt.commands.quickstart import quickstart_config, scored_weights

    cfg = quickstart_config(tmp_path, 45.0)
    assert cfg.train.ema_decay == QUICKSTART_EMA_DECAY and scored_weights(cfg) == "ema"
    assert scored_weights(quickstart_config(tmp_path, 45.0, ["train.ema_decay=0"])) == "raw"
    assert scored_weights(quickstart_config(tmp_path, 45.0, preset_name="gnmt-small")) == "raw"
