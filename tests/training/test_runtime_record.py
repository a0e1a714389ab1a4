"""A run says (one line) and records (meta.json ``runtime``) which kernels, op library and dtype
policy it ran with, above all where ``auto`` fell back (issue 45 B)."""
import json

import pytest

from tests.helpers import write_toy_data_dir
from tests.training.test_trainer import tiny_config
from tf_nmt.compat import tf
from tf_nmt.ops import isa, loader
from tf_nmt.training import precision, runtime
from tf_nmt.training.trainer import train


@pytest.fixture()
def data_dir(tmp_path):
    return write_toy_data_dir(tmp_path / "data")


def _train(data_dir, run, steps=5):
    lines = []
    train(tiny_config(data_dir, f"train.train_steps={steps}", "train.steps_per_cycle=5"), run,
          log=lines.append)
    return json.loads((run / "meta.json").read_text()), lines


def test_failed_op_library_falls_back_to_tf_said_and_recorded(data_dir, tmp_path, monkeypatch):
    def broken():
        raise ImportError("could not load tf-nmt custom ops from /x/_tf_nmt_ops.so "
                          "(undefined symbol: boom)")

    monkeypatch.setattr(loader, "load_ops", broken)
    monkeypatch.setattr(isa, "cpu_isa", lambda: "avx512")  # the load is what fails
    meta, lines = _train(data_dir, tmp_path / "run")
    kernels = meta["runtime"]["kernels"]
    for name in ("loss", "dropout", "norm"):
        assert kernels[name]["setting"] == "auto" and kernels[name]["used"] == "tf"
        assert "failed to load" in kernels[name]["fallback"] and "boom" in kernels[name]["fallback"]
    library = meta["runtime"]["op_library"]
    assert library["loaded"] is False and "boom" in library["load_error"]
    said = [line for line in lines if line.startswith("fallback:")]
    assert len(said) == 1, lines
    assert "train.loss_kernel" in said[0] and "failed to load" in said[0] and "boom" in said[0]


@pytest.mark.skipif(not loader.ops_available() or isa.cpu_isa() not in ("avx2", "avx512")
                    or bool(tf.config.list_physical_devices("GPU")),
                    reason="auto takes the C++ ops only where the library loads on an AVX2 CPU")
def test_normal_run_records_fused_kernels_library_and_policy(data_dir, tmp_path):
    run = tmp_path / "run"
    meta, lines = _train(data_dir, run)
    record = meta["runtime"]
    assert {k["used"] for k in record["kernels"].values()} == {"fused"}
    assert not any("fallback" in k for k in record["kernels"].values())
    assert not [line for line in lines if line.startswith("fallback:")]
    library = record["op_library"]
    assert library["loaded"] is True and library["load_error"] is None
    assert library["path"] == loader.library_path()
    assert library["build_record"]["path"] == loader.build_info_path()
    assert record["precision"]["policy"] == "float32"
    assert record["precision"]["asked"] == "train.mixed_precision=false"
    assert record["resuming"] is False and "runtime_history" not in meta
    # a resume passes check_resume and keeps the first start's record
    meta2, _ = _train(data_dir, run, steps=10)
    assert meta2["runtime"]["resuming"] is True
    assert meta2["runtime_history"] == [record]


def test_float16_fallback_is_said_and_recorded(monkeypatch):
    monkeypatch.setattr(precision, "gpu_compute_capabilities", lambda devices=None: [(7, 0)])
    policy, record = runtime.choose_policy(True)
    assert policy == "mixed_float16" and "float16" in record["fallback"]
    lines = runtime.fallback_lines({"loss": "a GPU is visible"}, record)
    assert len(lines) == 2 and "mixed_float16" in lines[1] and "train.loss_kernel" in lines[0]
