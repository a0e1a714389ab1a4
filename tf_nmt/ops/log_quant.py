"""Log (and fixed-point) quantisation of tensors as fused TF ops, plus 4-bit packing.

A B-bit code (uint8, 1 <= B <= 8) is ``(sign << (B-1)) | k`` with ``sign = v < 0`` and magnitude
index ``k in [0, 2^(B-1))``. Centres for scale S:

* log: ``+-S * 2^q`` with ``q = -k in (-2^(B-1), 0]``; nearest in normal space, i.e.
  ``q = ceil(log2(2/3 * |v| / S))`` clamped (ties go to the smaller centre);
* fixed (uniform baseline): ``+-S * (k + 1) / 2^(B-1)``; nearest, ties go down.

Neither has a zero level: 0 and NaN encode to the smallest positive magnitude, +-Inf to the
largest. Scale modes: ``"unscaled"`` (S = 1), ``"max"`` (S = max|v|) and ``"optimised"``
(start at max|v|, iterate ``S = sum(c|v|) / sum(c^2)`` with c the chosen relative centres, at most
``iterations`` times, until S stops changing). The fit ignores non-finite values; an all-zero or
empty tensor gets S = 0 (decodes to zeros). S is capped at 2^126 (so 1/S is a normal float) and
encoding computes ``t = |v| * (1/S)``; subnormals are flushed to zero throughout. ``quantize_dequantize`` has a straight-through
gradient so it can sit in a training graph.
"""
from __future__ import annotations

from typing import Tuple

from tf_nmt.compat import tf
from tf_nmt.ops._checks import float_tensor, invalid
from tf_nmt.ops.loader import load_ops

MODES = ("unscaled", "max", "optimised")


def _bits(bits) -> tf.Tensor:
    if isinstance(bits, int) and not 1 <= bits <= 8:
        raise invalid(f"bits must be in 1..8, got {bits}")
    return tf.convert_to_tensor(bits, tf.int32)


def _mode(mode: str) -> str:
    if mode not in MODES:
        raise invalid(f"mode must be one of {MODES}, got {mode!r}")
    return mode


class Quantizer:
    """One codec (``"log"`` or ``"fixed"``); both expose the same methods."""

    def __init__(self, kind: str) -> None:
        if kind not in ("log", "fixed"):
            raise ValueError(f"unknown quantizer kind {kind!r}")
        self.kind = kind

    def _op(self, suffix: str):
        return getattr(load_ops(), f"{self.kind}_quantize{suffix}")

    def fit_scale(self, x, bits: int, mode: str = "optimised", iterations: int = 10) -> tf.Tensor:
        """The scale S for ``x`` (scalar float32)."""
        return self._op("_fit")(float_tensor(x, "x"), _bits(bits), mode=_mode(mode), iterations=iterations)

    def encode(self, x, scale, bits: int) -> tf.Tensor:
        """uint8 codes of ``x`` (same shape) for a given scale."""
        return self._op("_encode")(float_tensor(x, "x"), tf.convert_to_tensor(scale, tf.float32), _bits(bits))

    def decode(self, codes, scale, bits: int, dtype=tf.float32) -> tf.Tensor:
        """Values of ``codes`` (uint8) as ``dtype``."""
        codes = tf.convert_to_tensor(codes)
        if codes.dtype != tf.uint8:
            raise invalid(f"codes must be uint8, got {codes.dtype.name}")
        return self._op("_decode")(codes, tf.convert_to_tensor(scale, tf.float32), _bits(bits), out_type=dtype)

    def quantize(self, x, bits: int, mode: str = "optimised", iterations: int = 10) -> Tuple[tf.Tensor, tf.Tensor]:
        """Fit + encode in one op: ``(codes, scale)``."""
        return tuple(self._op("")(float_tensor(x, "x"), _bits(bits), mode=_mode(mode), iterations=iterations))

    def quantize_dequantize(self, x, bits: int, mode: str = "optimised", iterations: int = 10) -> tf.Tensor:
        """``decode(encode(x))`` in x's dtype, with a straight-through (identity) gradient."""
        y, _ = self._op("_dequantize")(float_tensor(x, "x"), _bits(bits), mode=_mode(mode), iterations=iterations)
        return y


LOG = Quantizer("log")
FIXED = Quantizer("fixed")

log_fit_scale = LOG.fit_scale
log_encode = LOG.encode
log_decode = LOG.decode
log_quantize = LOG.quantize
log_quantize_dequantize = LOG.quantize_dequantize


def pack_nibbles(codes) -> tf.Tensor:
    """4-bit codes (any shape, flattened) packed two per byte, low nibble first."""
    codes = tf.convert_to_tensor(codes)
    if codes.dtype != tf.uint8:
        raise invalid(f"codes must be uint8, got {codes.dtype.name}")
    return load_ops().pack_nibbles(codes)


def unpack_nibbles(packed, size) -> tf.Tensor:
    """Inverse of :func:`pack_nibbles`: ``size`` codes as a uint8 vector."""
    packed = tf.convert_to_tensor(packed)
    if packed.dtype != tf.uint8:
        raise invalid(f"packed must be uint8, got {packed.dtype.name}")
    return load_ops().unpack_nibbles(packed, tf.convert_to_tensor(size, tf.int64))
