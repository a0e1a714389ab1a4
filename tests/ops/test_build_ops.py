"""custom_ops/build_ops.py: the TF_NMT_CUDA contract, without compiling anything real."""
import json
import os
import subprocess
import sys
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "custom_ops"))
import build_ops  # noqa: E402


@pytest.mark.parametrize("value, want", [(None, "auto"), ("", "auto"), ("auto", "auto"), ("1", "1"),
                                         ("true", "1"), ("0", "0"), ("off", "0")])
def test_cuda_setting(monkeypatch, value, want):
    if value is None:
        monkeypatch.delenv("TF_NMT_CUDA", raising=False)
    else:
        monkeypatch.setenv("TF_NMT_CUDA", value)
    assert build_ops.cuda_setting() == want


def test_bad_cuda_setting(monkeypatch):
    monkeypatch.setenv("TF_NMT_CUDA", "maybe")
    with pytest.raises(build_ops.CudaBuildError):
        build_ops.cuda_setting()


def test_gencode_flags(monkeypatch):
    monkeypatch.delenv("TF_NMT_CUDA_ARCHS", raising=False)
    flags = build_ops.gencode_flags()
    assert "-gencode=arch=compute_80,code=sm_80" in flags
    assert flags[-1] == "-gencode=arch=compute_90,code=compute_90"  # PTX for newer GPUs
    assert build_ops.gencode_flags("90") == ["-gencode=arch=compute_90,code=sm_90",
                                             "-gencode=arch=compute_90,code=compute_90"]
    with pytest.raises(build_ops.CudaBuildError):
        build_ops.gencode_flags("sm_90")


def test_nvcc_command_keeps_cpu_arithmetic():
    cmd = build_ops.nvcc_command("nvcc", "a.cu.cc", "a.o", ["-Ifoo", "-DX=1", "-O3", "-fPIC"])
    assert "--fmad=false" in cmd and "-Ifoo" in cmd and "-DX=1" in cmd and "-fPIC" in cmd
    assert build_ops.CUDA_SOURCES and all(s.endswith(".cu.cc") for s in build_ops.CUDA_SOURCES)
    assert not set(build_ops.CUDA_SOURCES) & set(build_ops.CPU_SOURCES)


def _fake_tf(cuda: bool):
    fake = types.SimpleNamespace(__version__="x", test=types.SimpleNamespace(is_built_with_cuda=lambda: cuda))
    return lambda: (fake, ["-O3"], ["-lfoo"])


def _fake_link(fail_cuda: bool, calls: list):
    def link(target, tmp, flags, lflags, nvcc):
        calls.append(nvcc)
        if nvcc and fail_cuda:
            raise subprocess.CalledProcessError(1, ["nvcc"], output="kernel.cu.cc(3): error: boom")
        with open(target, "w") as handle:
            handle.write("lib")
    return link


@pytest.fixture
def fake_build(monkeypatch, tmp_path):
    def setup(setting, nvcc="/usr/bin/nvcc", tf_cuda=True, fail_cuda=False):
        if setting is None:
            monkeypatch.delenv("TF_NMT_CUDA", raising=False)
        else:
            monkeypatch.setenv("TF_NMT_CUDA", setting)
        calls = []
        monkeypatch.setattr(build_ops, "_tf_flags", _fake_tf(tf_cuda))
        monkeypatch.setattr(build_ops.shutil, "which", lambda name: nvcc)
        monkeypatch.setattr(build_ops, "compile_and_link", _fake_link(fail_cuda, calls))
        monkeypatch.setattr(build_ops, "check_loads", lambda target: None)
        target = str(tmp_path / "_tf_nmt_ops.so")
        return target, calls
    return setup


def _info(target):
    with open(build_ops.build_info_path(target)) as handle:
        return json.load(handle)


def test_auto_builds_cuda_when_possible(fake_build):
    target, calls = fake_build(None)
    assert build_ops.build_ops_library(target, target + ".tmp")["cuda"] is True
    assert calls == ["/usr/bin/nvcc"] and _info(target)["cuda_status"] == "built"


def test_auto_falls_back_visibly(fake_build, capsys):
    target, calls = fake_build(None, fail_cuda=True)
    info = build_ops.build_ops_library(target, target + ".tmp")
    assert calls == ["/usr/bin/nvcc", None] and info["cuda"] is False
    assert _info(target)["cuda_status"] == "failed" and "boom" in _info(target)["reason"]
    assert "WARNING: tf-nmt CUDA kernels failed to build" in capsys.readouterr().err


@pytest.mark.parametrize("kw, reason", [({"nvcc": None}, "nvcc not found"),
                                        ({"tf_cuda": False}, "not built with CUDA"),
                                        ({"fail_cuda": True}, "boom")])
def test_required_cuda_fails_the_build(fake_build, kw, reason):
    target, calls = fake_build("1", **kw)
    with pytest.raises(build_ops.CudaBuildError, match=reason):
        build_ops.build_ops_library(target, target + ".tmp")
    assert None not in calls  # never falls back to the CPU-only library


@pytest.mark.parametrize("kw", [{"nvcc": None}, {"tf_cuda": False}])
def test_auto_without_cuda_is_quiet(fake_build, capsys, kw):
    target, calls = fake_build(None, **kw)
    assert build_ops.build_ops_library(target, target + ".tmp")["cuda_status"] == "unavailable"
    assert calls == [None] and "WARNING" not in capsys.readouterr().err


def test_disabled_skips_cuda(fake_build):
    target, calls = fake_build("0")
    assert build_ops.build_ops_library(target, target + ".tmp")["cuda_status"] == "disabled"
    assert calls == [None]


def test_loader_reports_and_warns(monkeypatch, tmp_path):
    from tf_nmt.ops import loader

    lib = tmp_path / "_tf_nmt_ops.so"
    monkeypatch.setenv("TF_NMT_OPS_LIBRARY", str(lib))
    assert loader.build_info() == {} and not loader.gpu_kernels_built()
    (tmp_path / "_tf_nmt_ops.build.json").write_text(json.dumps({"cuda": True, "cuda_status": "built"}))
    assert loader.gpu_kernels_built()
    (tmp_path / "_tf_nmt_ops.build.json").write_text(
        json.dumps({"cuda": False, "cuda_status": "failed", "reason": "nvcc: error: boom\nmore"}))
    with pytest.warns(RuntimeWarning, match="WITHOUT their CUDA kernels.*boom"):
        loader._warn_if_cuda_fell_back()


def test_setup_py_exits_non_zero_when_required_cuda_is_missing(tmp_path):
    env = dict(os.environ, TF_NMT_CUDA="1", PATH="/usr/bin:/bin")
    env.pop("CUDA_HOME", None)
    proc = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(tmp_path / "lib"),
         "--build-temp", str(tmp_path / "tmp")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    if "nvcc not found" not in proc.stderr and os.path.exists("/usr/bin/nvcc"):
        pytest.skip("nvcc is on /usr/bin here")
    assert proc.returncode != 0
    assert "TF_NMT_CUDA=1 but nvcc not found" in proc.stderr
    assert not (tmp_path / "lib" / "tf_nmt" / "ops" / "_tf_nmt_ops.so").exists()


def test_installed_library_cuda_build_did_not_fail():
    """Where nvcc and a CUDA TensorFlow exist (CI here), a broken CUDA kernel fails the suite
    instead of hiding behind the CPU-only fallback. The install must leave its build record
    beside the library (an editable install used to copy only the library, so this passed on
    an empty record and the loader could not tell a CUDA build from a fallback)."""
    from tf_nmt.ops import loader

    if os.environ.get("TF_NMT_OPS_LIBRARY"):
        pytest.skip("TF_NMT_OPS_LIBRARY points at another library")
    info = loader.build_info()
    assert info, f"no build record beside the installed library ({loader.build_info_path()})"
    assert info.get("cuda_status") != "failed", f"CUDA build failed: {info.get('reason')}"
    assert info["cuda_status"] in ("built", "unavailable", "disabled"), info


# The ops with CUDA kernels (README "GPU nodes"; the LR schedule's GPU kernel keeps everything in
# host memory); the training-speed kernels (loss, norm, dropout, argmax) and the log-space dot
# products are CPU only.
GPU_OPS = {
    "GradDrop", "GradDropGlobal", "OneBitQuantize", "PackNibbles", "UnpackNibbles", "NmtLearningRate",
    *(f"{kind}Quantize{what}" for kind in ("Log", "Fixed")
      for what in ("Fit", "Encode", "Decode", "", "Dequantize")),
}

KERNELS_CODE = """
import json, sys
import tensorflow as tf
from tensorflow.python.framework import kernels
def registered():
    return {(k.op, k.device_type) for k in kernels.get_all_registered_kernels().kernel}
before = registered()
tf.load_op_library(sys.argv[1])
devices = {}
for op, device in sorted(registered() - before):
    devices.setdefault(op, []).append(device)
print(json.dumps(devices))
"""


def test_installed_cuda_library_registers_every_gpu_kernel():
    """Where the install built the CUDA kernels (CI: nvcc 13 and TensorFlow's CUDA build, no
    GPU), the library registers a GPU kernel for exactly the ops that have one, and a CPU kernel
    for every op. What the kernels compute is checked on a GPU (tests/gpu)."""
    from tf_nmt.ops import loader

    info = loader.build_info()
    if not info.get("cuda"):
        pytest.skip(f"the installed library has no CUDA kernels: {info.get('reason', 'no build record')}")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-c", KERNELS_CODE, loader.library_path()],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    devices = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {op for op, devs in devices.items() if "GPU" in devs} == GPU_OPS
    assert all("CPU" in devs for devs in devices.values()), devices


# Ops that belong to an experiment, not to the library (see custom_ops/build_ops.py): the Table 7.5
# microbenchmark ops are built from experiments/lowprec/cc into a library of their own.
EXPERIMENT_OP_PREFIXES = ("LowprecBench",)

OPS_CODE = """
import json, sys
import tensorflow as tf
from tensorflow.python.framework import kernels, op_def_registry
module = tf.load_op_library(sys.argv[1])
ops = sorted(name for name in dir(module) if op_def_registry.get(name) is not None)
print(json.dumps({"ops": ops,
                  "kernels": sorted({k.op for k in kernels.get_all_registered_kernels().kernel})}))
"""


def test_library_sources_hold_no_experiment_ops():
    assert all(s.startswith(os.path.join("custom_ops", "cc") + os.sep) for s in build_ops.OPS_SOURCES)
    for path in build_ops.OPS_SOURCES + build_ops.HEADERS:
        with open(os.path.join(ROOT, path)) as handle:
            text = handle.read()
        assert not [p for p in EXPERIMENT_OP_PREFIXES if f'"{p}' in text], path


def test_loaded_library_registers_no_experiment_ops():
    """The library the loader finds registers its ops but none of an experiment's. Listed in a
    fresh process: here an experiment's library may have registered those names first, and
    TensorFlow silently drops a second registration."""
    from tf_nmt.ops import loader

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-c", OPS_CODE, loader.library_path()],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {"LowprecMatMul", "LowprecEncode", "GradDrop"} <= set(found["ops"])  # the listing works
    assert not [op for op in found["ops"] + found["kernels"] if op.startswith(EXPERIMENT_OP_PREFIXES)]


def test_corrupt_build_record_is_reported_not_read_as_no_record(monkeypatch, tmp_path):
    from tf_nmt.ops import loader

    monkeypatch.setenv("TF_NMT_OPS_LIBRARY", str(tmp_path / "_tf_nmt_ops.so"))
    assert loader.build_record()["status"] == "missing"
    record = tmp_path / "_tf_nmt_ops.build.json"
    record.write_text('{"cuda": false, "cuda_status": "fail')  # a truncated write
    found = loader.build_record()
    assert found["status"] == "unreadable" and "JSONDecodeError" in found["error"]
    with pytest.warns(RuntimeWarning, match=r"_tf_nmt_ops\.build\.json is unreadable \(JSONDecodeError"):
        loader._warn_if_cuda_fell_back()
    with pytest.warns(RuntimeWarning, match="unreadable"):
        assert loader.build_info() == {} and not loader.gpu_kernels_built()
    library = loader.library_record()
    assert library["build_record"]["status"] == "unreadable"
    assert library["build_record"]["path"] == str(record)
    record.write_text("[1, 2]")
    assert loader.build_record()["status"] == "unreadable"
