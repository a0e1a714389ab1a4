"""The Table 7.5 microbenchmark ops (thesis section 7.3.5), kept out of the tf-nmt ops library.

``LowprecBenchDot`` and ``LowprecBenchMatMul`` time the log-space kernels of
:mod:`tf_nmt.ops.lowprec` and their int8 / fp32 baselines in C++ loops on one thread (so TF's
per-op cost does not swamp a 128-element dot product). They are experiment code: their source,
``experiments/lowprec/cc/lowprec_bench_ops.cc``, is compiled here on first use, together with the
production ``custom_ops/cc/kernels/lowprec_dot.cc`` and with the flags of
``custom_ops/build_ops.py``, into a library of its own,
``build/lowprec_bench/_lowprec_bench_ops.so`` in the checkout (git-ignored). It is rebuilt when a
source, a header of ``custom_ops/cc/kernels``, ``build_ops.py`` or the TensorFlow version changed.
Needs a checkout (like every experiment) and g++.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Tuple

from tf_nmt.compat import tf
from tf_nmt.ops.lowprec import IMPLS
from tf_nmt.utils.io import write_json_atomic

ROOT = Path(__file__).resolve().parents[2]
BUILD_OPS = ROOT / "custom_ops" / "build_ops.py"
# Relative to the checkout: the benchmark ops, and the production kernels they time.
SOURCES: Tuple[str, ...] = ("experiments/lowprec/cc/lowprec_bench_ops.cc",
                            "custom_ops/cc/kernels/lowprec_dot.cc")
BUILD_DIR = ROOT / "build" / "lowprec_bench"
LIBRARY = BUILD_DIR / "_lowprec_bench_ops.so"
BUILD_RECORD = BUILD_DIR / "_lowprec_bench_ops.build.json"
METHODS: Tuple[str, ...] = ("fp32", "int8", "shift16", "lut8")


def _build_ops() -> ModuleType:
    """``custom_ops/build_ops.py`` of this checkout (imported by path, as setup.py does)."""
    if not BUILD_OPS.is_file():
        raise ImportError(f"{BUILD_OPS} not found: the lowprec benchmark ops build from a checkout")
    spec = importlib.util.spec_from_file_location("_tf_nmt_build_ops", BUILD_OPS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _dependencies(build_ops: ModuleType) -> list:
    return ([ROOT / s for s in SOURCES] + [ROOT / h for h in build_ops.HEADERS] + [BUILD_OPS])


def needs_build(build_ops: ModuleType) -> bool:
    """True when the library is missing, older than a dependency, or built for another TF."""
    if not LIBRARY.exists():
        return True
    built = LIBRARY.stat().st_mtime
    if any(p.stat().st_mtime > built for p in _dependencies(build_ops)):
        return True
    try:
        record = json.loads(BUILD_RECORD.read_text())
    except (OSError, ValueError):
        return True
    return not isinstance(record, dict) or record.get("tensorflow") != tf.__version__


def build(force: bool = False) -> Path:
    """Compiles the benchmark ops library if it is out of date (or ``force``); returns its path.
    Objects go to a fresh directory and the library replaces the old one atomically, so
    concurrent builds do not clash."""
    build_ops = _build_ops()
    if not force and not needs_build(build_ops):
        return LIBRARY
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="obj-", dir=BUILD_DIR))
    try:
        partial = tmp / LIBRARY.name
        try:
            build_ops.build_cpu_library(str(partial), str(tmp), list(SOURCES))
        except subprocess.CalledProcessError as err:
            raise RuntimeError(f"could not build the lowprec benchmark ops: {err}\n"
                               f"{(err.output or '')[-4000:]}") from err
        os.replace(partial, LIBRARY)
        write_json_atomic(BUILD_RECORD, {"tensorflow": tf.__version__, "sources": list(SOURCES)})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return LIBRARY


@functools.lru_cache(maxsize=None)
def load_bench_ops() -> ModuleType:
    """The generated op module of the benchmark library (built first if needed)."""
    module = tf.load_op_library(str(build()))
    if not hasattr(module, "lowprec_bench_dot"):
        # TensorFlow drops (silently) ops whose names another loaded library registered first.
        raise ImportError(
            "the LowprecBench* ops are already registered in this process, probably by a tf-nmt "
            "ops library built before they moved out of it; rebuild it with "
            "`python setup.py build_ext --inplace`")
    return module


def _choice(value: str, allowed: Tuple[str, ...], name: str) -> str:
    if value not in allowed:
        raise tf.errors.InvalidArgumentError(None, None, f"{name} must be one of {allowed}, got {value!r}")
    return value


def bench_dot(method: str, pairs: int = 16, reps: int = 100_000, impl: str = "auto") -> float:
    """ns per 128-element dot product of ``method`` (one of METHODS), timed in C++ over
    ``reps`` passes of ``pairs`` independent dot products (single thread)."""
    ns, _ = load_bench_ops().lowprec_bench_dot(
        tf.constant(pairs, tf.int64), tf.constant(reps, tf.int64),
        method=_choice(method, METHODS, "method"), impl=_choice(impl, IMPLS, "impl"))
    return float(ns.numpy())


def bench_matmul(method: str, m: int, k: int, n: int, reps: int = 10, impl: str = "auto") -> float:
    """ns per ``[m, k] x [k, n]`` matmul of ``method`` in C++ (single thread; the weights are
    packed once outside the timing, the activations' codes are packed in every call)."""
    ns, _ = load_bench_ops().lowprec_bench_mat_mul(
        tf.constant(m, tf.int64), tf.constant(k, tf.int64), tf.constant(n, tf.int64),
        tf.constant(reps, tf.int64), method=_choice(method, METHODS, "method"),
        impl=_choice(impl, IMPLS, "impl"))
    return float(ns.numpy())
