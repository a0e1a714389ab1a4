"""``tf-nmt train-async`` end to end on the toy corpus (a real local parameter-server cluster,
in a child process): updates = pushes / k, the run directory loads like any other run.

train-async runs on Keras 2 only: its child processes run on Keras 2 whatever this process
uses, and in a Keras 3 process it is refused (tests/test_keras3_models.py checks the CLI)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import write_toy_data_dir
from tf_nmt.compat import ENV_VAR, KERAS3

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TINY = ["model.num_layers=1", "model.d_model=32", "model.num_heads=2", "model.ff_dim=64",
        "model.dropout=0.0", "data.vocab_size=320", "data.batch_tokens=256", "train.peak_lr=0.003",
        "train.warmup_steps=10", "train.train_steps=12"]


def tf_nmt(*args, log_level: str = "3"):
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL=log_level,
               **{ENV_VAR: "2"})  # train-async and its runs are Keras 2's
    return subprocess.run([sys.executable, "-m", "tf_nmt", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=400)


def test_train_async_cli_end_to_end(tmp_path):
    data = write_toy_data_dir(tmp_path / "data")
    run = tmp_path / "run"
    sets = [x for s in TINY for x in ("--set", s)]
    proc = tf_nmt("train-async", "--run-dir", str(run), "--data-dir", str(data), "--workers", "2",
                  "--k", "2", "--progress-every", "0.5", *sets, log_level="1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "progress: " in proc.stdout and "/24 pushes" in proc.stdout
    # nothing of the run is freed after its servers are stopped (each such object logged a
    # gRPC error on its way out)
    assert "Failed to remove function remotely" not in proc.stderr
    report = json.loads((run / "async.json").read_text())
    assert report["updates"] == 12 and report["pushes"] == 24 and report["k"] == 2
    assert sum(report["histogram"]) == 24 and report["workers"] == 2
    assert report["final_loss"] < report["losses"][0]
    for name in ("config.yaml", "meta.json", "vocab.model", "checkpoints/checkpoint"):
        assert (run / name).exists(), name
    again = tf_nmt("train-async", "--run-dir", str(run), "--data-dir", str(data), *sets)
    assert again.returncode == 2 and "starts fresh runs only" in again.stderr
    out = tf_nmt("translate", "--run-dir", str(run), "--input", str(data / "corpus" / "dev.en"))
    assert out.returncode == 0 and len(out.stdout.splitlines()) == 10


def test_unsupported_settings_are_refused_before_anything_is_written(tmp_path):
    from tf_nmt.config import ConfigError, load_config
    from tf_nmt.training.async_trainer import train_nmt_async

    data = write_toy_data_dir(tmp_path / "data")
    if KERAS3:  # refused before any of its own checks, whatever the settings
        with pytest.raises(ConfigError, match="train-async runs on Keras 2 only"):
            train_nmt_async(load_config(None, TINY + [f"data.data_dir={data}"]), tmp_path / "run",
                            workers=2)
        assert not (tmp_path / "run").exists()
        return
    for bad in ("train.optimizer=sgd", "train.mixed_precision=true",
                "train.comm=graddrop", "train.quantize_bits=4", "train.init_from=runs/parent",
                "train.schedule_implementation=op", "train.backward_passes_per_step=2",
                "train.time_budget_minutes=5", "train.steps_per_execution=2"):
        cfg = load_config(None, TINY + [f"data.data_dir={data}", bad])
        key = bad.split("=")[0]
        with pytest.raises(ConfigError, match=f"{key}=.* is not supported by train-async"):
            train_nmt_async(cfg, tmp_path / "run", workers=2)
        assert not (tmp_path / "run").exists()
    cfg = load_config(None, TINY + [f"data.data_dir={data}"])
    clipped = load_config(None, TINY + [f"data.data_dir={data}", "train.clip_norm=1.0"])
    for config, kwargs, match in (
            (cfg, {"n_push": 0}, "--n-push and --n-fetch must be >= 1"),
            (cfg, {"n_fetch": 0}, "--n-push and --n-fetch must be >= 1"),
            (cfg, {"progress_every": -1}, "--progress-every must be >= 0"),
            (cfg, {"n_push": 2, "synchronous": True}, "exclude --synchronous"),
            (clipped, {"refresh_every": 2}, "exclude --synchronous and --refresh-every")):
        with pytest.raises(ConfigError, match=match):
            train_nmt_async(config, tmp_path / "run", workers=2, **kwargs)
        assert not (tmp_path / "run").exists()


def test_downpour_cli_end_to_end(tmp_path):
    data = write_toy_data_dir(tmp_path / "data")
    run = tmp_path / "run"
    sets = [x for s in TINY + ["train.clip_norm=1.0"] for x in ("--set", s)]
    proc = tf_nmt("train-async", "--run-dir", str(run), "--data-dir", str(data), "--workers", "2",
                  "--n-push", "2", "--n-fetch", "3", *sets)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((run / "async.json").read_text())
    assert report["updates"] == 12 and report["pushes"] == 12
    assert report["n_push"] == 2 and report["n_fetch"] == 3 and report["clip_norm"] == 1.0
    assert report["worker_steps"] >= 24 and len(report["staleness"]) == 12
    assert report["clipped_fraction"] > 0  # a fresh Transformer's gradient norm is above 1
    assert report["final_loss"] < report["losses"][0]
    out = tf_nmt("translate", "--run-dir", str(run), "--input", str(data / "corpus" / "dev.en"))
    assert out.returncode == 0 and len(out.stdout.splitlines()) == 10
