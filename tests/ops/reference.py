"""Plain NumPy references for the custom ops (float32 steps mirror the kernels exactly)."""
from __future__ import annotations

import math

import numpy as np

TINY = np.float32(np.finfo(np.float32).tiny)  # FLT_MIN, the smallest normal float32
MAX_SCALE = np.float32(2.0 ** 126)  # scales are capped so that 1 / S is a normal float


def ftz(x: np.ndarray) -> np.ndarray:
    """Flush subnormals to (signed) zero, as TF's CPU threads do (FTZ/DAZ)."""
    x = np.asarray(x)
    return np.where(np.abs(x) < TINY, x * 0, x).astype(x.dtype)


def ftz_sum(gradient: np.ndarray, residual: np.ndarray) -> np.ndarray:
    """gradient + residual with FTZ/DAZ semantics (what the GradDrop kernel computes)."""
    with np.errstate(all="ignore"):
        return ftz(ftz(gradient) + ftz(residual))


def flush(a: np.ndarray) -> np.ndarray:
    """Non-negative magnitudes below FLT_MIN (and NaN) become 0, as in quant_codec.h."""
    with np.errstate(invalid="ignore"):
        return np.where(a >= TINY, a, np.float32(0)).astype(np.float32)


def threshold_exact(total_sum: np.ndarray, ratio: float) -> float:
    """Exact GradDrop threshold: the floor(R * n)-th smallest non-NaN |sum| (0 for R = 0)."""
    ratio = float(ftz(np.float32(ratio)))  # the op takes R as float32 (a subnormal R reads as 0)
    if ratio <= 0:
        return 0.0
    mags = np.abs(total_sum.ravel().astype(np.float32))
    mags = mags[~np.isnan(mags)]
    if mags.size == 0:
        return math.inf
    drop = min(int(math.floor(ratio * mags.size)), mags.size - 1)
    return float(np.partition(mags, drop)[drop])


def grad_drop(gradient: np.ndarray, residual: np.ndarray, threshold: float):
    """(indices, values, new_residual) for a given threshold."""
    total = ftz_sum(gradient, residual)
    keep = np.abs(total.astype(np.float32)) >= np.float32(threshold)
    indices = np.flatnonzero(keep.ravel()).astype(np.int64)
    values = total.ravel()[indices]
    new_residual = np.where(keep, np.zeros_like(total), total)
    return indices, values, new_residual


def _log_index(t: np.ndarray, levels: int) -> np.ndarray:
    mant, exp = np.frexp(t.astype(np.float32))
    q = np.where(mant <= 0.75, exp - 1, exp)
    k = np.clip(-q.astype(np.int64), 0, levels - 1)
    k = np.where(np.isinf(t), 0, k)
    return np.where(t > 0, k, levels - 1)  # t is already flushed, NaN-free


def _fixed_index(t: np.ndarray, levels: int) -> np.ndarray:
    u = np.minimum(np.nan_to_num(t, nan=0.0), np.float32(2.0)).astype(np.float32) * np.float32(levels)
    j = np.ceil(u - np.float32(0.5)).astype(np.int64)
    k = np.clip(j, 1, levels) - 1
    return np.where(t > 0, k, 0)


def centres(kind: str, k: np.ndarray, bits: int) -> np.ndarray:
    """Relative centres (S = 1) of magnitude indices ``k``."""
    if kind == "log":
        return flush(np.ldexp(np.float32(1.0), -k).astype(np.float32))
    return flush(np.ldexp((k + 1).astype(np.float32), -(bits - 1)).astype(np.float32))


def mag_index(kind: str, x: np.ndarray, scale: float, bits: int) -> np.ndarray:
    levels = 1 << (bits - 1)
    a = flush(np.abs(x.astype(np.float32)))
    s = flush(np.float32(scale))
    inv = np.float32(1.0) / min(s, MAX_SCALE) if s > 0 else np.float32(0.0)  # t = |v| * (1 / S), as the kernels
    with np.errstate(invalid="ignore", over="ignore"):
        t = flush((a * inv).astype(np.float32))
    return (_log_index if kind == "log" else _fixed_index)(t, levels)


def encode(kind: str, x: np.ndarray, scale: float, bits: int) -> np.ndarray:
    """uint8 codes: (sign << (bits - 1)) | k."""
    k = mag_index(kind, x, scale, bits)
    with np.errstate(invalid="ignore"):
        sign = (x.astype(np.float32) <= -TINY).astype(np.int64)
    return ((sign << (bits - 1)) | k).astype(np.uint8)


def decode(kind: str, codes: np.ndarray, scale: float, bits: int) -> np.ndarray:
    levels = 1 << (bits - 1)
    k = codes.astype(np.int64) & (levels - 1)
    if kind == "log":
        mag = np.ldexp(np.float32(scale), -k).astype(np.float32)
    else:
        step = flush(flush(np.float32(scale)) * np.float32(2.0 ** -(bits - 1)))
        mag = step * (k + 1).astype(np.float32)
    mag = flush(mag.astype(np.float32))
    return np.where((codes >> (bits - 1)) & 1, -mag, mag).astype(np.float32)


def fit_scale(kind: str, x: np.ndarray, bits: int, mode: str = "optimised", iterations: int = 10) -> float:
    """Scale fit: 1, max|v| or the iterated least-squares S (finite values only)."""
    if mode == "unscaled":
        return 1.0
    a = flush(np.abs(x.astype(np.float32)).ravel())
    a = a[np.isfinite(a)]
    scale = min(np.float32(a.max()), MAX_SCALE) if a.size else np.float32(0.0)
    if mode == "max" or scale == 0:
        return float(scale)
    for _ in range(iterations):
        c = centres(kind, mag_index(kind, a, float(scale), bits), bits).astype(np.float64)
        den = np.sum(c * c)
        if not den > 0:
            break
        nxt = np.float32(min(np.sum(c * a) / den, float(MAX_SCALE)))
        if not nxt >= TINY or nxt == scale:
            break
        scale = nxt
    return float(scale)


def lr_schedule_value(name: str, step: int, **params: float) -> float:
    """Plain-Python value of learning-rate schedule ``name`` at the 0-based ``step``."""
    s = max(step + 1.0, 1.0)
    peak = params["peak_lr"]
    if name == "warmup_inverse_sqrt":
        w = params["warmup_steps"]
        return peak * min(s / w, math.sqrt(w / s))
    if name == "inverse_sqrt":
        w = params["warmup_steps"]
        return peak * math.sqrt(w / max(s, w))
    if name == "linear_warmup":
        return peak * min(1.0, s / params["warmup_steps"])
    if name == "step_decay":
        start, every = params["decay_start"], params["decay_every"]
        n = 1 + math.floor((s - start) / every) if s > start else 0
        return peak * params.get("decay_factor", 0.5) ** n
    if name == "constant":
        return peak
    raise ValueError(f"unknown schedule {name!r}")
