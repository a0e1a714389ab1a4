"""The quickstart scores and exports the average of its last checkpoints (toy corpus, tiny model)."""
import json
import os

import numpy as np
import pytest

import tf_nmt.quickstart as quickstart
from tests.helpers import write_toy_data_dir
from tests.training.test_trainer import TINY
from tf_nmt.errors import UsageError

SHORT = TINY + ["data.oversample={}", "train.steps_per_cycle=5", "train.keep_checkpoints=3"]


@pytest.mark.slow
def test_quickstart_exports_and_scores_the_average_of_its_last_checkpoints(tmp_path, monkeypatch):
    from tf_nmt.training.checkpoints import list_checkpoints
    from tf_nmt.run_dir import load_trained_model

    data = write_toy_data_dir(tmp_path / "data")
    monkeypatch.setattr(quickstart, "prepare_corpus", lambda *a, **kw: {})  # the toy corpus is it
    run, export = tmp_path / "run", tmp_path / "export"
    # a step limit instead of the time budget (which a loaded machine would make train too few
    # steps for 3 checkpoints); the record says which ended training
    payload = quickstart.run_quickstart(
        data, run, export, precision="float32", average_last=3,
        overrides=SHORT + ["train.train_steps=20", "train.time_budget_minutes=0"])
    kept = list_checkpoints(run / "checkpoints")
    assert len(kept) == 3 and payload["training"]["steps"] == 20
    assert 0 < payload["training"]["cores_busy"] <= os.cpu_count() + 0.1
    assert payload["training"]["time_budget_minutes"] == 0
    assert payload["training"]["step_limit"] == 20
    # the record goes into the run directory (not the working directory)
    record = json.loads((run / quickstart.RECORD_NAME).read_text())["checkpoint_average"]
    assert record["asked"] == 3 and record["averaged"] == kept
    assert isinstance(record["last_checkpoint_bleu"], float)
    # the averaged checkpoint holds the mean of the kept ones, and it is what was scored
    averaged, _, _ = load_trained_model(run, str(run / "averaged"))
    each = [load_trained_model(run, p)[0].get_weights() for p in kept]
    for got, *ws in zip(averaged.get_weights(), *each):
        np.testing.assert_allclose(got, np.mean(np.stack(ws).astype(np.float64), 0), atol=1e-6)
    assert (run / "averaged" / "averaged_from.txt").read_text().split() == kept
    assert len(payload["export"]["fresh_process_samples"]) == len(quickstart.SAMPLE_SENTENCES)


def test_average_last_beyond_the_kept_checkpoints_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(UsageError, match="--average-last 6: use 1 .* train.keep_checkpoints \\(5\\)"):
        quickstart.run_quickstart(tmp_path / "data", tmp_path / "run", tmp_path / "e",
                                  tmp_path / "r.json", average_last=6)
    with pytest.raises(UsageError, match="--average-last 0"):
        quickstart.run_quickstart(tmp_path / "data", tmp_path / "run", tmp_path / "e",
                                  tmp_path / "r.json", average_last=0)
    assert not (tmp_path / "run").exists() and not (tmp_path / "data").exists()
