"""Quantising a model's weights to B bits per tensor, dequantising them, and the size report.

Quantisation runs the fused custom op (fit the scale, then encode); dequantisation is the
stock-op/NumPy decoder of :mod:`tf_nmt.quantization.codec`, identical to the op's decode.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from tf_nmt import ops
from tf_nmt.compat import tf, variable_name
from tf_nmt.quantization.codec import decode_np
from tf_nmt.quantization.packing import packed_size
from tf_nmt.quantization.policy import QuantPolicy

SCALE_BYTES = 4  # one float32 scale per quantised tensor


@dataclass
class TensorEntry:
    """One model variable: either quantised (``codes`` + ``scale``) or kept (``values``)."""

    name: str
    shape: Tuple[int, ...]
    codes: Optional[np.ndarray] = None   # uint8, shape ``shape``
    scale: float = 0.0
    values: Optional[np.ndarray] = None  # float32, for kept tensors

    @property
    def quantized(self) -> bool:
        return self.codes is not None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def stored_bytes(self, bits: int) -> int:
        return packed_size(self.size, bits) + SCALE_BYTES if self.quantized else 4 * self.size

    def dequantize(self, policy: QuantPolicy) -> np.ndarray:
        if not self.quantized:
            return self.values
        return decode_np(self.codes, self.scale, policy.bits, policy.kind).reshape(self.shape)


def _quantizer(kind: str):
    return ops.LOG if kind == "log" else ops.FIXED


def quantize_array(values: np.ndarray, policy: QuantPolicy) -> Tuple[np.ndarray, float]:
    """(uint8 codes of ``values``' shape, scale) with the policy's quantiser and scale fit."""
    codes, scale = _quantizer(policy.kind).quantize(
        tf.convert_to_tensor(values, tf.float32), policy.bits, policy.scale, policy.iterations)
    return codes.numpy(), float(scale.numpy())


def quantize_weights(names: Sequence[str], arrays: Sequence[np.ndarray],
                     policy: QuantPolicy) -> List[TensorEntry]:
    """Quantise the tensors the policy selects; keep the others as float32."""
    entries = []
    for name, array in zip(names, arrays):
        array = np.asarray(array, np.float32)
        entry = TensorEntry(name=name, shape=tuple(int(d) for d in array.shape))
        if policy.quantizes(array.shape):
            entry.codes, entry.scale = quantize_array(array, policy)
        else:
            entry.values = array.copy()
        entries.append(entry)
    return entries


def model_weights(model) -> Tuple[List[str], List[np.ndarray]]:
    """Names and values of all of a model's variables, in ``model.weights`` order."""
    return [variable_name(w) for w in model.weights], [w.numpy() for w in model.weights]


def quantize_model(model, policy: QuantPolicy) -> List[TensorEntry]:
    return quantize_weights(*model_weights(model), policy)


def assign_entries(model, entries: Sequence[TensorEntry], policy: QuantPolicy) -> None:
    """Load dequantised ``entries`` into ``model`` (same variables, same order, same shapes)."""
    check_matches(model, entries)
    model.set_weights([e.dequantize(policy) for e in entries])


def _plain(name: str) -> str:
    """A variable name without Keras's uniquifying ``_N`` suffixes (``dense_3/kernel`` -> ``dense/kernel``)."""
    name = name[:-2] if name.endswith(":0") else name  # packed before names dropped it
    return re.sub(r"_\d+(?=/|$)", "", name)


def check_matches(model, entries: Sequence[TensorEntry]) -> None:
    """Raise ValueError unless ``entries`` are ``model``'s variables (count, order, names, shapes)."""
    weights = model.weights
    if len(weights) != len(entries):
        raise ValueError(f"the packed model has {len(entries)} tensors but this model has "
                         f"{len(weights)} variables (different architecture?)")
    for w, e in zip(weights, entries):
        if tuple(w.shape) != e.shape or _plain(variable_name(w)) != _plain(e.name):
            raise ValueError(f"packed tensor {e.name} {list(e.shape)} does not match model variable "
                             f"{w.name} {list(w.shape)} (different architecture?)")


def size_report(entries: Sequence[TensorEntry], policy: QuantPolicy,
                originals: Optional[Sequence[np.ndarray]] = None) -> Dict[str, Any]:
    """Per-tensor and total sizes (float32 vs packed), and the relative error when ``originals``."""
    rows = []
    for i, e in enumerate(entries):
        row = {"name": e.name, "shape": list(e.shape), "params": e.size, "quantized": e.quantized,
               "fp32_bytes": 4 * e.size, "stored_bytes": e.stored_bytes(policy.bits)}
        if e.quantized:
            row["scale"] = e.scale
        if originals is not None:
            ref = np.asarray(originals[i], np.float64)
            err = np.linalg.norm(e.dequantize(policy).astype(np.float64) - ref)
            row["relative_error"] = float(err / max(np.linalg.norm(ref), 1e-30))
        rows.append(row)
    fp32 = sum(r["fp32_bytes"] for r in rows)
    stored = sum(r["stored_bytes"] for r in rows)
    return {"policy": policy.to_dict(), "tensors": rows,
            "total": {"params": sum(r["params"] for r in rows),
                      "quantized_params": sum(r["params"] for r in rows if r["quantized"]),
                      "fp32_bytes": fp32, "stored_bytes": stored,
                      "ratio": fp32 / stored if stored else float("inf")}}


def format_report(report: Dict[str, Any], max_rows: int = 0) -> str:
    """A plain-text table of :func:`size_report` (all rows unless ``max_rows``)."""
    rows = report["tensors"][: max_rows or None]
    lines = [f"{'tensor':<60} {'shape':>14} {'q':>2} {'fp32 B':>10} {'stored B':>10} {'rel.err':>8}"]
    for r in rows:
        err = f"{r['relative_error']:.4f}" if "relative_error" in r else ""
        lines.append(f"{r['name'][-60:]:<60} {'x'.join(map(str, r['shape'])) or '-':>14} "
                     f"{'y' if r['quantized'] else 'n':>2} {r['fp32_bytes']:>10,} {r['stored_bytes']:>10,} {err:>8}")
    t = report["total"]
    lines.append(f"total: {t['params']:,} params ({t['quantized_params']:,} quantised), "
                 f"{t['fp32_bytes']:,} B fp32 -> {t['stored_bytes']:,} B packed ({t['ratio']:.2f}x)")
    return "\n".join(lines)
