"""Loads the compiled custom-op library ``_tf_nmt_ops.so`` once, with a clear error if missing."""
from __future__ import annotations

import functools
import os
from types import ModuleType

from tf_nmt.compat import tf

LIBRARY_NAME = "_tf_nmt_ops.so"
BUILD_HINT = (
    "Build it from the repository root with `pip install --no-build-isolation -e .` "
    "(or `python setup.py build_ext --inplace`); TensorFlow must be importable at build time."
)


def library_path() -> str:
    """Where the library is expected: next to this file, or ``$TF_NMT_OPS_LIBRARY``."""
    return os.environ.get("TF_NMT_OPS_LIBRARY") or os.path.join(os.path.dirname(__file__), LIBRARY_NAME)


@functools.lru_cache(maxsize=None)
def load_ops() -> ModuleType:
    """The generated op module (``load_ops().grad_drop`` etc.); raises ImportError if unbuilt."""
    path = library_path()
    if not os.path.exists(path):
        raise ImportError(f"tf-nmt custom ops library not found at {path}. {BUILD_HINT}")
    try:
        return tf.load_op_library(path)
    except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError, OSError) as err:
        raise ImportError(
            f"could not load tf-nmt custom ops from {path} ({err}). It was probably built against "
            f"another TensorFlow version; rebuild it. {BUILD_HINT}"
        ) from err


def ops_available() -> bool:
    """True when the library loads (for tests and configs that can fall back to Python)."""
    try:
        load_ops()
    except ImportError:
        return False
    return True
