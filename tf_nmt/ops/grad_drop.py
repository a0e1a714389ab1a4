"""Gradient dropping with error feedback (Aji & Heafield 2017) as fused TF ops.

Output format (what a rank sends, e.g. with Horovod allgather): ``indices`` is a 1-D int64 tensor
of flat (row-major) positions into the gradient, in increasing order; ``values`` the kept entries
``gradient + residual`` at those positions (same dtype as the gradient). ``new_residual`` has the
gradient's shape and holds everything that was not sent. Decoding on the receiver is
``tf.scatter_nd(indices[:, None], values, [size])``.

Rules: the threshold t is chosen so that ~``drop_ratio`` of the non-NaN ``|g + r|`` fall below
it (exact selection when the tensor has <= ``exact_below`` entries, else a seeded stratified sample of
``max(ceil(sample_fraction * size), 16384)`` entries). An entry is kept iff ``|g + r| >= t`` (ties
are kept). ``drop_ratio = 0`` keeps everything. NaN is never kept (it stays in the residual);
+-Inf is always kept. Mass is conserved bit-exactly: ``scatter(values) + new_residual == g + r``
(the sum as TF computes it on CPU, i.e. with subnormals flushed to zero).
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

from tf_nmt.compat import tf
from tf_nmt.ops._checks import float_tensor, invalid, same_dtype, same_shape
from tf_nmt.ops.loader import load_ops

Dropped = Tuple[tf.Tensor, tf.Tensor, tf.Tensor]


def _scalars(drop_ratio: float, sample_fraction: float, seed: int):
    return (tf.convert_to_tensor(drop_ratio, tf.float32),
            tf.convert_to_tensor(sample_fraction, tf.float32),
            tf.convert_to_tensor(seed, tf.int64))


def grad_drop(gradient, residual, drop_ratio: float, sample_fraction: float = 0.001, seed: int = 0,
              exact_below: int = 65536, return_threshold: bool = False):
    """Drop all but the ~(1 - drop_ratio) largest ``|gradient + residual|`` of one tensor.

    Returns ``(indices, values, new_residual)`` (plus the scalar threshold if asked).
    """
    gradient = float_tensor(gradient, "gradient")
    residual = float_tensor(residual, "residual", gradient.dtype)
    same_shape(gradient, residual, "gradient and residual")
    out = load_ops().grad_drop(gradient, residual, *_scalars(drop_ratio, sample_fraction, seed),
                               exact_below=exact_below)
    return tuple(out) if return_threshold else tuple(out[:3])


def grad_drop_global(gradients: Sequence, residuals: Sequence, drop_ratio: float,
                     sample_fraction: float = 0.001, seed: int = 0, exact_below: int = 65536,
                     per_tensor: bool = False) -> List[Dropped]:
    """GradDrop over a list of tensors with one shared threshold (or per-tensor thresholds).

    Returns one ``(indices, values, new_residual)`` per tensor; indices are per-tensor flat.
    """
    if len(gradients) != len(residuals):
        raise invalid(f"got {len(gradients)} gradients but {len(residuals)} residuals")
    if not gradients:
        return []
    grads = [float_tensor(g, f"gradients[{i}]") for i, g in enumerate(gradients)]
    same_dtype(grads, "gradients")
    res = [float_tensor(r, f"residuals[{i}]", grads[0].dtype) for i, r in enumerate(residuals)]
    for i, (g, r) in enumerate(zip(grads, res)):
        same_shape(g, r, f"gradients[{i}] and residuals[{i}]")
    if per_tensor:
        return [grad_drop(g, r, drop_ratio, sample_fraction, seed + i, exact_below)
                for i, (g, r) in enumerate(zip(grads, res))]
    idx, vals, new_res, _ = load_ops().grad_drop_global(
        grads, res, *_scalars(drop_ratio, sample_fraction, seed), exact_below=exact_below)
    return list(zip(idx, vals, new_res))


def num_columns(shape: Sequence[int]) -> int:
    """Columns for 1-bit quantisation: the last axis for rank >= 2; one column for rank <= 1."""
    return int(shape[-1]) if len(shape) >= 2 and int(shape[-1]) > 0 else 1


def one_bit_quantize(indices, values, residual) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """1-bit stacking (Seide et al. 2014) on GradDrop output.

    Per column (see :func:`num_columns`; column of flat index i is ``i % columns``) kept positive
    values are replaced by the mean of that column's kept positives, negatives by the mean of the
    kept negatives; zeros stay. The error goes into the residual, so ``scatter(quantized) +
    new_residual == g + r`` up to one rounding per kept entry. Returns ``(quantized_values,
    new_residual, positive_means, negative_means)``; a compact sender can transmit
    ``(indices, sign bits, means)`` instead of the values.
    """
    residual = float_tensor(residual, "residual")
    values = float_tensor(values, "values", residual.dtype)
    columns = num_columns(residual.shape.as_list() if residual.shape.rank is not None else [])
    return tuple(load_ops().one_bit_quantize(
        tf.convert_to_tensor(indices, tf.int64), values, residual, tf.constant(columns, tf.int64)))


def grad_drop_one_bit(gradient, residual, drop_ratio: float, sample_fraction: float = 0.001,
                      seed: int = 0, exact_below: int = 65536) -> Dropped:
    """GradDrop then 1-bit quantisation of the kept values; returns (indices, values, new_residual)."""
    indices, values, new_residual = grad_drop(gradient, residual, drop_ratio, sample_fraction, seed,
                                              exact_below)
    quantized, new_residual, _, _ = one_bit_quantize(indices, values, new_residual)
    return indices, quantized, new_residual


def densify(indices, values, shape) -> tf.Tensor:
    """Receiver side: the dense tensor of ``shape`` holding ``values`` at flat ``indices``."""
    size = 1
    for dim in shape:
        size *= int(dim)
    flat = tf.scatter_nd(tf.reshape(indices, [-1, 1]), values, [size])
    return tf.reshape(flat, shape)
