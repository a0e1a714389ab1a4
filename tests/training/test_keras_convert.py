"""``tf-nmt convert-keras`` (issue 57 item 5): a run committed from Keras 2 (tf_keras) code,
tests/fixtures/keras2_run, converted to Keras 3 serves the same outputs from its raw and EMA
weights, and resumes training as the Keras 2 run does; what cannot resume says so. Every step
runs in a child process on the Keras it names, whatever this process's default is."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import write_toy_data_dir

pytestmark = pytest.mark.slow  # trains (a tiny model) in four child processes

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "keras2_run"


def _on(keras, *argv, check=True):
    env = dict(os.environ, TF_NMT_KERAS=str(keras), PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, *argv], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"{argv} on Keras {keras} failed:\n{proc.stderr[-3000:]}")
    return proc


def _worker(keras, *args):
    return _on(keras, "-m", "tests.training.keras_convert_worker", *map(str, args))


def _convert(keras, src, dst, check=True):
    return _on(keras, "-m", "tf_nmt", "convert-keras", "--run-dir", str(src), "--output-dir",
               str(dst), check=check)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    out = tmp_path_factory.mktemp("conv") / "keras3_run"
    said = _convert(3, FIXTURE, out).stdout
    assert "converted 2 checkpoint(s)" in said and "resumes where the original stopped" in said
    return out


def test_the_converted_run_serves_the_same_outputs_from_raw_and_ema_weights(converted, tmp_path):
    meta = json.loads((converted / "meta.json").read_text())
    assert meta["keras"] == 3 and meta["converted_from"]["keras"] == 2
    assert meta["converted_from"]["resumable"] is True
    assert sorted(p.name for p in (converted / "checkpoints").glob("*.index")) == \
        ["ckpt-10.index", "ckpt-5.index"]
    for weights in ("raw", "ema"):
        _worker(2, "logits", FIXTURE, weights, tmp_path / f"k2-{weights}.npy")
        _worker(3, "logits", converted, weights, tmp_path / f"k3-{weights}.npy")
        k2, k3 = (np.load(tmp_path / f"k{v}-{weights}.npy") for v in (2, 3))
        np.testing.assert_allclose(k3, k2, rtol=1e-5, atol=1e-5, err_msg=weights)
    # the EMA is not the raw weights (so the comparison above tells them apart)
    assert not np.allclose(np.load(tmp_path / "k3-raw.npy"), np.load(tmp_path / "k3-ema.npy"),
                           atol=1e-3)


def test_the_converted_run_resumes_as_the_keras2_run_does(converted, tmp_path):
    data = write_toy_data_dir(tmp_path / "data")
    k2_run, k3_run = tmp_path / "k2", tmp_path / "k3"
    shutil.copytree(FIXTURE, k2_run)
    shutil.copytree(converted, k3_run)
    _worker(2, "resume", k2_run, data, 20, tmp_path / "k2.npz")
    _worker(3, "resume", k3_run, data, 20, tmp_path / "k3.npz")
    k2, k3 = np.load(tmp_path / "k2.npz"), np.load(tmp_path / "k3.npz")
    assert k2["losses"][:, 0].tolist() == k3["losses"][:, 0].tolist() == [5, 10, 15, 20]
    np.testing.assert_allclose(k3["losses"], k2["losses"], rtol=1e-5)
    # the outputs, not each weight: Adam moves the attention keys' biases, whose gradient is
    # zero (a softmax does not see them), by rounding noise, which differs between the versions
    np.testing.assert_allclose(k3["logits"], k2["logits"], rtol=1e-4, atol=1e-4)


def test_what_cannot_convert_or_resume_says_so_in_one_line(converted, tmp_path):
    same = _convert(2, FIXTURE, tmp_path / "same", check=False)
    assert same.returncode == 2 and "trained with Keras 2, this process's Keras" in same.stderr
    exists = _convert(3, FIXTURE, converted, check=False)
    assert exists.returncode == 2 and "exists; give a new --output-dir" in exists.stderr
    # a run trained on two ranks converts for evaluation and export, not to resume
    two = tmp_path / "two-ranks"
    shutil.copytree(FIXTURE, two)
    meta = json.loads((two / "meta.json").read_text())
    (two / "meta.json").write_text(json.dumps(dict(meta, world_size=2)))
    said = _convert(3, two, tmp_path / "two-k3").stdout
    assert "for evaluation, export and --init-from only: trained on 2 ranks" in said
    resume = _on(3, "-m", "tf_nmt", "train", "--run-dir", str(tmp_path / "two-k3"),
                 "--data-dir", str(write_toy_data_dir(tmp_path / "data")), check=False)
    assert resume.returncode == 2 and "converted from Keras 2 for evaluation" in resume.stderr
    assert "Traceback" not in resume.stderr
