"""Shared inputs and comparisons for the GPU parity tests."""
from __future__ import annotations

import numpy as np

from tf_nmt.compat import tf

DTYPES = {"float32": tf.float32, "float16": tf.float16, "bfloat16": tf.bfloat16}
BITS_VIEW = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def run_on(device: str, fn, *args, **kwargs):
    """``fn(*args)`` with inputs copied to and the op placed on ``device`` ('CPU' / 'GPU')."""
    with tf.device(f"/{device}:0"):
        args = [tf.identity(a) if isinstance(a, tf.Tensor) else a for a in args]
        return fn(*args, **kwargs)


def on_gpu(tensor: tf.Tensor) -> bool:
    return "GPU" in tensor.device


def bits(x) -> np.ndarray:
    """The raw bits of a tensor / array (bit-exact comparison, NaN payloads and -0 included)."""
    a = x.numpy() if hasattr(x, "numpy") else np.asarray(x)
    return np.ascontiguousarray(a).view(BITS_VIEW[a.dtype.itemsize])


def assert_bits_equal(got, want, what: str = "") -> None:
    g, w = bits(got), bits(want)
    assert g.shape == w.shape, f"{what}: shape {g.shape} vs {w.shape}"
    bad = np.flatnonzero(g.ravel() != w.ravel())
    assert bad.size == 0, f"{what}: {bad.size} of {g.size} differ, first at {bad[:5]}"


def special_values(n: int, seed: int = 0) -> np.ndarray:
    """float32 normals with zeros, -0, NaN, +-Inf, subnormals, FLT_MIN and huge values mixed in."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32)
    if n >= 16:
        tiny = np.finfo(np.float32).tiny
        specials = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, tiny, -tiny, tiny / 4, -tiny / 8,
                             3e38, -3e38, 1e-30, 0.75, 1.5, -0.375, 2.0 ** -126], np.float32)
        at = rng.choice(n, size=min(n, 4 * specials.size), replace=False)
        x[at] = np.resize(specials, at.size)
    return x


def tensor(x: np.ndarray, dtype: str) -> tf.Tensor:
    return tf.cast(tf.constant(x), DTYPES[dtype])
