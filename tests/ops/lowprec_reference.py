"""NumPy reference for the log-space dot-product ops (tf_nmt/ops/lowprec.py), on the codes
themselves (not the kernels' packed lanes), so packing, padding and dispatch are all checked."""
from __future__ import annotations

import numpy as np

from tests.ops import reference as ref

SHIFT16_OFFSET = 14
LUT8_BASE = 2.0 ** (4.0 / 7.0)
LUT8_TABLE = np.array([255, 172, 115, 78, 52, 35, 24, 16, 11, 7, 5, 3, 2, 1, 1], np.int64)
# float32((b^-j + b^-(j+1)) / 2): the decision thresholds between lut8 centres j and j + 1.
LUT8_MID = np.array([float.fromhex(h) for h in (
    "0x1.ac4676p-1", "0x1.203536p-1", "0x1.83e626p-2", "0x1.050964p-2", "0x1.5f544ep-3",
    "0x1.d8daacp-4", "0x1.3e3510p-4")], np.float32)


def lut8_table_from_formula() -> np.ndarray:
    """round(255 * 2^(-4e/7)), e = 0..14 (round half up; no entry is a tie)."""
    e = np.arange(15, dtype=np.float64)
    return np.floor(255.0 * 2.0 ** (-4.0 * e / 7.0) + 0.5).astype(np.int64)


def lut8_mids_from_formula() -> np.ndarray:
    j = np.arange(7, dtype=np.float64)
    return ((LUT8_BASE ** -j + LUT8_BASE ** -(j + 1)) / 2).astype(np.float32)


def encode(x: np.ndarray, scale: float, variant: str) -> np.ndarray:
    """uint8 codes (sign << 3) | k; shift16 is LogQuantizeEncode with bits = 4."""
    x = np.asarray(x, np.float32)
    if variant == "shift16":
        return ref.encode("log", x, scale, 4)
    a = ref.flush(np.abs(x))
    s = ref.flush(np.float32(scale))
    inv = np.float32(1.0) / min(s, ref.MAX_SCALE) if s > 0 else np.float32(0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        t = ref.flush((a * inv).astype(np.float32))
    k = np.sum(t[..., None] <= LUT8_MID, axis=-1).astype(np.int64)
    with np.errstate(invalid="ignore"):
        sign = (x <= -ref.TINY).astype(np.int64)
    return ((sign << 3) | k).astype(np.uint8)


def powers(variant: str) -> np.ndarray:
    """Integer power P[e] of an exponent sum e = ka + kb in [0, 14]."""
    if variant == "shift16":
        return np.left_shift(1, SHIFT16_OFFSET - np.arange(15)).astype(np.int64)
    return LUT8_TABLE


def accumulators(a: np.ndarray, b_nk: np.ndarray, variant: str) -> np.ndarray:
    """int32 [M, N]: sum_t (-1)^(sa XOR sb) P[ka + kb] over a [M, K] and b [N, K] codes."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b_nk, np.int64)
    table = powers(variant)
    out = np.zeros((a.shape[0], b.shape[0]), np.int64)
    for i in range(a.shape[0]):  # row by row keeps the [N, K] temporaries small
        e = (a[i] & 7)[None, :] + (b & 7)
        neg = ((a[i] >> 3)[None, :] ^ (b >> 3)) & 1
        out[i] = np.where(neg == 1, -table[e], table[e]).sum(axis=1)
    assert np.all(np.abs(out) < 2 ** 31)
    return out.astype(np.int32)


def rescale(variant: str, scale_a: float, scale_b: float) -> np.float32:
    """The float32 factor c: (S_a S_b) 2^-14 or (S_a S_b) / 255, each step in float32."""
    ab = np.float32(scale_a) * np.float32(scale_b)
    if variant == "shift16":
        return np.float32(ab * np.float32(2.0 ** -SHIFT16_OFFSET))
    return np.float32(ab / np.float32(255))


def matmul(a: np.ndarray, b_nk: np.ndarray, scale_a: float, scale_b: float, variant: str) -> np.ndarray:
    acc = accumulators(a, b_nk, variant)
    return (acc.astype(np.float32) * rescale(variant, scale_a, scale_b)).astype(np.float32)


def decode(codes: np.ndarray, scale: float, variant: str) -> np.ndarray:
    """float64 values +-S base^-k (for error bounds, not bit-exact comparisons)."""
    codes = np.asarray(codes, np.int64)
    base = 2.0 if variant == "shift16" else LUT8_BASE
    mag = float(scale) * base ** -(codes & 7).astype(np.float64)
    return np.where(codes >= 8, -mag, mag)
