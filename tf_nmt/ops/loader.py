"""Loads the compiled custom-op library ``_tf_nmt_ops.so`` once, with a clear error if missing.

The build writes ``_tf_nmt_ops.build.json`` next to the library (custom_ops/build_ops.py):
:func:`gpu_kernels_built` says whether the library holds the CUDA kernels, and loading a library
whose CUDA build failed and fell back to CPU-only warns (pip -q hides the build's own warning).
"""
from __future__ import annotations

import functools
import json
import os
import warnings
from types import ModuleType
from typing import Any, Dict, Optional

from tf_nmt.compat import tf

LIBRARY_NAME = "_tf_nmt_ops.so"
BUILD_HINT = (
    "Build it from the repository root with `pip install --no-build-isolation -e .` "
    "(or `python setup.py build_ext --inplace`); TensorFlow must be importable at build time."
)


def library_path() -> str:
    """Where the library is expected: next to this file, or ``$TF_NMT_OPS_LIBRARY``."""
    return os.environ.get("TF_NMT_OPS_LIBRARY") or os.path.join(os.path.dirname(__file__), LIBRARY_NAME)


def build_info_path() -> str:
    """The build record next to the library: ``<library without .so>.build.json``."""
    return os.path.splitext(library_path())[0] + ".build.json"


def build_record() -> Dict[str, Any]:
    """The build record as found: ``{"path": ..., "status": "ok", "record": {...}}``, status
    ``"missing"`` when there is no file, or ``"unreadable"`` with ``"error"`` (the OS or parse
    error) when it cannot be read or is not a JSON object, which is not the same as no record."""
    path = build_info_path()
    try:
        with open(path) as handle:
            info = json.load(handle)
    except FileNotFoundError:
        return {"path": path, "status": "missing"}
    except (OSError, ValueError) as err:
        return {"path": path, "status": "unreadable", "error": f"{type(err).__name__}: {err}"}
    if not isinstance(info, dict):
        return {"path": path, "status": "unreadable",
                "error": f"not a JSON object but a {type(info).__name__}"}
    return {"path": path, "status": "ok", "record": info}


def build_info() -> Dict[str, Any]:
    """The build record (``cuda``, ``cuda_status``, ``reason``, ...); ``{}`` when there is none
    or it is unreadable (warned: :func:`build_record` says which)."""
    found = build_record()
    if found["status"] == "unreadable":
        _warn_unreadable_record(found)
    return found.get("record", {})


def _warn_unreadable_record(found: Dict[str, Any]) -> None:
    warnings.warn(
        f"tf-nmt custom-op build record {found['path']} is unreadable ({found['error']}): whether "
        "the library holds its CUDA kernels, and whether their build failed, is unknown. "
        f"Rebuild the library to rewrite it. {BUILD_HINT}", RuntimeWarning, stacklevel=3)


def gpu_kernels_built() -> bool:
    """True when the library was built with its CUDA kernels (per the build record)."""
    return bool(build_info().get("cuda", False))


def _warn_if_cuda_fell_back() -> None:
    info = build_info()
    if info.get("cuda_status") == "failed":
        reason = str(info.get("reason", "")).strip().splitlines()
        warnings.warn(
            "tf-nmt custom ops were built WITHOUT their CUDA kernels because the CUDA build "
            f"failed ({reason[0] if reason else 'see the build log'}); on a GPU these ops run on "
            "the CPU. Rebuild with TF_NMT_CUDA=1 to see the error, or TF_NMT_CUDA=0 to silence "
            f"this. Details: {build_info_path()}", RuntimeWarning, stacklevel=3)


@functools.lru_cache(maxsize=None)
def load_ops() -> ModuleType:
    """The generated op module (``load_ops().grad_drop`` etc.); raises ImportError if unbuilt."""
    path = library_path()
    if not os.path.exists(path):
        raise ImportError(f"tf-nmt custom ops library not found at {path}. {BUILD_HINT}")
    try:
        module = tf.load_op_library(path)
    except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError, OSError) as err:
        raise ImportError(
            f"could not load tf-nmt custom ops from {path} ({err}). It was probably built against "
            f"another TensorFlow version; rebuild it. {BUILD_HINT}"
        ) from err
    _warn_if_cuda_fell_back()
    return module


def ops_available() -> bool:
    """True when the library loads (for tests and configs that can fall back to Python)."""
    try:
        load_ops()
    except ImportError:
        return False
    return True


def load_error() -> Optional[str]:
    """Why the library does not load (the ImportError's text), or None when it loads."""
    try:
        load_ops()
    except ImportError as err:
        return str(err)
    return None


def library_record() -> Dict[str, Any]:
    """What a run records about the op library: its path, whether it loaded (else the load
    error) and its build record (:func:`build_record`: CUDA built, status and reason)."""
    error = load_error()
    found = build_record()
    info = found.pop("record", {})
    found.update({key: info[key] for key in ("cuda", "cuda_status", "tensorflow") if key in info})
    if info.get("reason"):
        found["reason"] = str(info["reason"]).strip().splitlines()[0]
    return {"path": library_path(), "loaded": error is None, "load_error": error,
            "build_record": found}
