"""Log-space dot products and matrix multiplies on 4-bit codes (thesis section 7.3.5, Table 7.5).

Values are ``a = S * sign * base^-k`` with the LogQuantize 4-bit code layout
``code = (sign << 3) | k``, ``k in [0, 8)``, one code per byte (uint8; packed nibbles are not
accepted: unpack them with :func:`tf_nmt.ops.unpack_nibbles`). There is no zero code. A product
of two codes is a sign XOR and an exponent add ``e = ka + kb in [0, 14]``, so ``sum_i a_i b_i``
needs no multiplier. Two variants:

* ``"shift16"``: base 2, the same codes as ``LOG.encode(x, scale, 4)``. Each term is
  ``+-2^(14 - e)`` computed by a 16-bit shift; the int32 accumulator is exact and
  ``y = float32(acc) * (S_a * S_b * 2^-14)``.
* ``"lut8"``: base ``256^(1/14) = 2^(4/7)``, so the 15 powers fit in a byte. Each term is
  ``+-LUT8_TABLE[e]`` with ``LUT8_TABLE[e] = round(255 * 2^(-4e/7))``, looked up with
  ``vpshufb``; ``y = float32(acc) * (S_a * S_b / 255)``. The table rounds small powers coarsely
  (``e = 13`` gives 1 for 1.48), the price of 8-bit entries.

The matmul computes ``A[M, K] @ B`` with ``b_codes`` as ``[N, K]`` (``b_layout="nk"``, the
kernel's layout: rows of both operands run along K) or ``[K, N]`` (``"kn"``, like a Dense
kernel; transposed first). On CPUs with AVX-512 F/BW/VBMI/VNNI the SIMD kernels run; otherwise,
with ``impl="scalar"`` or with ``$TF_NMT_LOWPREC_SCALAR=1`` a portable loop gives the same
integers. Misuse (ranks, K mismatch, codes >= 16, bad variant/scale) raises InvalidArgumentError.

The Table 7.5 microbenchmarks of these kernels are experiment code, in a library of their own
(``experiments/lowprec/bench_ops.py``), not ops of this package.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

from tf_nmt.compat import tf
from tf_nmt.ops._checks import float_tensor, invalid
from tf_nmt.ops.loader import load_ops

VARIANTS: Tuple[str, ...] = ("shift16", "lut8")
IMPLS: Tuple[str, ...] = ("auto", "simd", "scalar")
B_LAYOUTS: Tuple[str, ...] = ("nk", "kn")
FORCE_SCALAR_ENV = "TF_NMT_LOWPREC_SCALAR"

SHIFT16_OFFSET = 14
LUT8_BASE = 2.0 ** (4.0 / 7.0)  # 256^(1/14)
LUT8_ONE = 255
LUT8_TABLE: Tuple[int, ...] = (255, 172, 115, 78, 52, 35, 24, 16, 11, 7, 5, 3, 2, 1, 1)


def _choice(value: str, allowed: Tuple[str, ...], name: str) -> str:
    if value not in allowed:
        raise invalid(f"{name} must be one of {allowed}, got {value!r}")
    return value


def _codes(codes, name: str) -> tf.Tensor:
    try:
        tensor = tf.convert_to_tensor(codes)
    except (TypeError, ValueError) as err:
        raise invalid(f"{name}: {err}") from err
    if tensor.dtype != tf.uint8:
        raise invalid(f"{name} must be uint8 (one 4-bit code per byte), got {tensor.dtype.name}")
    return tensor


def _b_nk(b_codes, b_layout: str) -> tf.Tensor:
    b = _codes(b_codes, "b_codes")
    if _choice(b_layout, B_LAYOUTS, "b_layout") == "kn":
        if b.shape.rank is not None and b.shape.rank != 2:
            raise invalid(f"b_codes must be [K, N], got shape {b.shape}")
        b = tf.transpose(b)
    return b


def relative_centres(variant: str) -> np.ndarray:
    """float32 ``base^-k`` for k = 0..7 (the values of codes 0..7 at scale 1)."""
    base = 2.0 if _choice(variant, VARIANTS, "variant") == "shift16" else LUT8_BASE
    return (base ** -np.arange(8, dtype=np.float64)).astype(np.float32)


def encode(x, scale, variant: str) -> tf.Tensor:
    """uint8 4-bit codes of ``x`` (same shape) for a fixed ``scale`` (nearest centre in normal
    space, ties to the smaller; 0/NaN -> smallest magnitude, +-Inf -> largest). For
    ``"shift16"`` these equal ``LOG.encode(x, scale, 4)``."""
    return load_ops().lowprec_encode(float_tensor(x, "x"), tf.convert_to_tensor(scale, tf.float32),
                                     scheme=_choice(variant, VARIANTS, "variant"))


def decode(codes, scale, variant: str) -> tf.Tensor:
    """float32 values ``+-scale * base^-k`` of ``codes`` (codes >= 16 raise)."""
    codes = _codes(codes, "codes")
    tf.debugging.assert_less(codes, tf.constant(16, tf.uint8), message="codes must be < 16")
    centres = tf.constant(relative_centres(variant))
    mag = tf.gather(centres, tf.cast(codes & 7, tf.int32)) * tf.convert_to_tensor(scale, tf.float32)
    return tf.where(codes >= 8, -mag, mag)


def matmul_accumulators(a_codes, b_codes, variant: str, b_layout: str = "nk",
                        impl: str = "auto") -> tf.Tensor:
    """Exact int32 accumulators ``[M, N]``: ``sum_t (-1)^(sa^sb) P[ka + kb]`` with
    ``P[e] = 2^(14 - e)`` (shift16) or ``LUT8_TABLE[e]`` (lut8)."""
    return load_ops().lowprec_mat_mul_accum(
        _codes(a_codes, "a_codes"), _b_nk(b_codes, b_layout),
        scheme=_choice(variant, VARIANTS, "variant"), impl=_choice(impl, IMPLS, "impl"))


def matmul(a_codes, b_codes, scale_a, scale_b, variant: str, b_layout: str = "nk",
           impl: str = "auto") -> tf.Tensor:
    """float32 ``[M, N]``: the accumulators times ``scale_a * scale_b * 2^-14`` (shift16) or
    ``scale_a * scale_b / 255`` (lut8), each step in float32."""
    return load_ops().lowprec_mat_mul(
        _codes(a_codes, "a_codes"), _b_nk(b_codes, b_layout),
        tf.convert_to_tensor(scale_a, tf.float32), tf.convert_to_tensor(scale_b, tf.float32),
        scheme=_choice(variant, VARIANTS, "variant"), impl=_choice(impl, IMPLS, "impl"))


def dense(x, w_codes, x_scale, w_scale, variant: str, w_layout: str = "kn",
          impl: str = "auto") -> tf.Tensor:
    """``x @ W`` with x (``[..., K]``, float) encoded on the fly with the fixed ``x_scale`` and
    W given as codes (``[K, N]`` by default); returns float32 ``[..., N]``."""
    x = float_tensor(x, "x")
    w = _b_nk(w_codes, w_layout)
    codes = encode(tf.reshape(x, [-1, tf.shape(x)[-1]]), x_scale, variant)
    y = matmul(codes, w, x_scale, w_scale, variant, "nk", impl)
    return tf.reshape(y, tf.concat([tf.shape(x)[:-1], tf.shape(w)[:1]], axis=0))


def simd_available() -> bool:
    """True when this CPU runs the AVX-512 F/BW/VBMI/VNNI kernels."""
    return bool(load_ops().lowprec_simd_available().numpy())


def resolved_impl(impl: str = "auto") -> str:
    """``"simd"`` or ``"scalar"``: the code path :func:`matmul` / :func:`matmul_accumulators`
    take with ``impl`` now (their kernels' own resolution, ``$TF_NMT_LOWPREC_SCALAR`` included)."""
    simd, _ = load_ops().lowprec_resolve_impl(impl=_choice(impl, IMPLS, "impl"))
    return "simd" if bool(simd.numpy()) else "scalar"


def scalar_forced_by_env() -> bool:
    """True when ``$TF_NMT_LOWPREC_SCALAR`` makes ``impl="auto"`` take the scalar loop (as the
    kernels read it, on any CPU)."""
    _, allowed = load_ops().lowprec_resolve_impl()
    return not bool(allowed.numpy())
