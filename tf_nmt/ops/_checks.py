"""Argument checks shared by the op wrappers: misuse raises InvalidArgumentError, never crashes."""
from __future__ import annotations

from typing import Iterable

from tf_nmt.compat import tf

FLOAT_TYPES = (tf.float32, tf.float16, tf.bfloat16)


def invalid(message: str) -> tf.errors.InvalidArgumentError:
    """An InvalidArgumentError raised from Python (same class as kernel errors)."""
    return tf.errors.InvalidArgumentError(None, None, message)


def float_tensor(value, name: str, dtype=None) -> tf.Tensor:
    """``value`` as a tensor of one of FLOAT_TYPES (``dtype`` if given)."""
    try:
        tensor = tf.convert_to_tensor(value)
    except (TypeError, ValueError) as err:
        raise invalid(f"{name}: {err}") from err
    if tensor.dtype not in FLOAT_TYPES:
        raise invalid(f"{name} must be float32, float16 or bfloat16, got {tensor.dtype.name}")
    if dtype is not None and tensor.dtype != dtype:
        raise invalid(f"{name} has dtype {tensor.dtype.name}, expected {dtype.name}")
    return tensor


def same_dtype(tensors: Iterable[tf.Tensor], name: str) -> None:
    """All tensors share one dtype."""
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) > 1:
        raise invalid(f"{name} must all have one dtype, got {sorted(d.name for d in dtypes)}")


def same_shape(a: tf.Tensor, b: tf.Tensor, what: str) -> None:
    """Static shapes agree where known (the kernels check the rest at run time)."""
    if not a.shape.is_compatible_with(b.shape):
        raise invalid(f"{what}: shapes differ, {a.shape} vs {b.shape}")
