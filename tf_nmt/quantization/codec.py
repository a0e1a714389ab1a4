"""Decoding log / fixed-point codes with stock TensorFlow ops (and NumPy), bit-exact with the
custom ``LogQuantizeDecode`` / ``FixedQuantizeDecode`` kernels.

A B-bit code is ``(sign << (B-1)) | k``; the magnitude is ``S * 2^-k`` (log) or
``S * (k+1) / 2^(B-1)`` (fixed), and magnitudes below the smallest normal float32 are flushed to
zero, as in the kernels. The graph version is what the packed SavedModel runs at serving time.
"""
from __future__ import annotations

import numpy as np

from tf_nmt.compat import tf
from tf_nmt.config import ConfigError

KINDS = ("log", "fixed")
_TINY = float(np.finfo(np.float32).tiny)


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ConfigError(f"quantiser kind must be one of {KINDS}, got {kind!r}")
    return kind


def _pow2_neg(k: tf.Tensor) -> tf.Tensor:
    """Exact float32 ``2^-k`` for int32 ``0 <= k <= 126`` built from the exponent bits."""
    return tf.bitcast(tf.bitwise.left_shift(127 - k, 23), tf.float32)


def decode_tf(codes: tf.Tensor, scale: tf.Tensor, bits: int, kind: str = "log") -> tf.Tensor:
    """float32 values of uint8 ``codes`` for scale ``scale`` (stock TF ops only)."""
    check_kind(kind)
    codes = tf.cast(tf.convert_to_tensor(codes, tf.uint8), tf.int32)
    scale = tf.convert_to_tensor(scale, tf.float32)
    tiny = tf.constant(_TINY, tf.float32)
    k = tf.bitwise.bitwise_and(codes, (1 << (bits - 1)) - 1)
    negative = tf.equal(tf.bitwise.bitwise_and(tf.bitwise.right_shift(codes, bits - 1), 1), 1)
    if kind == "log":
        half = k // 2  # two exact power-of-two factors, each >= 2^-64, so no spurious underflow
        mag = scale * _pow2_neg(half) * _pow2_neg(k - half)
    else:
        flushed = tf.where(scale < tiny, 0.0, scale)
        step = flushed * (2.0 ** -(bits - 1))
        step = tf.where(step < tiny, 0.0, step)
        mag = step * tf.cast(k + 1, tf.float32)
    mag = tf.where(mag < tiny, tf.zeros_like(mag), mag)
    return tf.where(negative, -mag, mag)


def decode_np(codes: np.ndarray, scale: float, bits: int, kind: str = "log") -> np.ndarray:
    """NumPy version of :func:`decode_tf` (same float32 arithmetic)."""
    check_kind(kind)
    codes = np.asarray(codes, np.uint8).astype(np.int64)
    k = codes & ((1 << (bits - 1)) - 1)
    tiny = np.float32(_TINY)
    s = np.float32(scale)
    if kind == "log":
        mag = np.ldexp(s, -k).astype(np.float32)
    else:
        s = s if s >= tiny else np.float32(0)
        step = np.float32(s * np.float32(2.0 ** -(bits - 1)))
        step = step if step >= tiny else np.float32(0)
        mag = (step * (k + 1).astype(np.float32)).astype(np.float32)
    mag = np.where(mag < tiny, np.float32(0), mag).astype(np.float32)
    return np.where((codes >> (bits - 1)) & 1, -mag, mag).astype(np.float32)
