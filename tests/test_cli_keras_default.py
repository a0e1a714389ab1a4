"""Keras 3 is tf-nmt's default, and Keras 2 runs keep working without a flag (issue 57): with
neither ``--keras`` nor ``TF_NMT_KERAS``, the command builds new models on Keras 3, uses the
Keras an existing run was trained on (``tests/fixtures/keras2_run``, committed from Keras 2
code), and runs ``train-async`` on Keras 2. Each case is a fresh ``tf-nmt`` process, as a user
runs it, whatever Keras the suite itself runs on."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tf_nmt
from tf_nmt.commands.keras import run_keras

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "keras2_run"


def _tf_nmt(*argv, keras=""):
    """``python -m tf_nmt argv`` in a fresh process with ``TF_NMT_KERAS=keras`` (unset if empty)."""
    env = {k: v for k, v in os.environ.items() if k != "TF_NMT_KERAS"}
    env.update(PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2")
    if keras:
        env["TF_NMT_KERAS"] = keras
    return subprocess.run([sys.executable, "-m", "tf_nmt", *map(str, argv)], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=600)


def test_a_run_records_the_keras_it_was_trained_on(tmp_path):
    assert tf_nmt.KERAS_DEFAULT == "3"
    assert run_keras(tmp_path) is None                     # no run there
    assert run_keras(FIXTURE) == 2
    (tmp_path / "meta.json").write_text(json.dumps({"vocab_size": 8}))  # from before the record
    assert run_keras(tmp_path) == tf_nmt.UNRECORDED_RUN_KERAS == 2
    (tmp_path / "meta.json").write_text(json.dumps({"keras": 3}))
    assert run_keras(tmp_path) == 3
    (tmp_path / "meta.json").write_text("{not json")
    assert run_keras(tmp_path) is None  # the command itself reports it


def test_new_models_are_keras3_without_a_flag():
    code = "from tf_nmt import compat; print('KERAS', compat.KERAS_VERSION, compat.keras_name())"
    env = {k: v for k, v in os.environ.items() if k != "TF_NMT_KERAS"}
    out = subprocess.run([sys.executable, "-c", code], env=dict(env, PYTHONPATH=str(REPO)),
                         cwd=REPO, capture_output=True, text=True, timeout=300).stdout
    assert "KERAS 3 keras 3." in out, out


@pytest.mark.slow
def test_a_keras2_run_translates_without_a_flag_and_is_refused_when_forced(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    source = tmp_path / "in.txt"
    source.write_text("the cat sat on the mat .\nhello world\n")
    proc = _tf_nmt("translate", "--run-dir", run, "--input", source, "--output", tmp_path / "o1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"using Keras 2: {run} was trained with Keras 2" in proc.stderr, proc.stderr[-3000:]
    assert len((tmp_path / "o1").read_text().splitlines()) == 2
    # a chosen version wins, and the other version's run is refused in one line, with the way out
    proc = _tf_nmt("translate", "--run-dir", run, "--input", source, "--output", tmp_path / "o2",
                   keras="3")
    errors = [line for line in proc.stderr.splitlines() if line.startswith("tf-nmt: error:")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr[-3000:]
    assert "trained with Keras 2" in errors[0] and "convert-keras" in errors[0]
    assert not (tmp_path / "o2").exists()


def test_train_async_runs_on_keras2_without_a_flag(tmp_path):
    # --workers 0 stops it at its own first check, after the Keras choice (no cluster started)
    argv = ("train-async", "--run-dir", tmp_path / "run", "--workers", "0")
    proc = _tf_nmt(*argv)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "using Keras 2: train-async runs on Keras 2 only" in proc.stderr
    assert "tf-nmt: error: --workers must be >= 1" in proc.stderr, proc.stderr[-3000:]
    forced = _tf_nmt(*argv, keras="3")
    assert forced.returncode == 2 and "train-async runs on Keras 2 only" in forced.stderr
    assert "using Keras 2" not in forced.stderr
