"""The C++ ``NmtLearningRate`` op: a learning-rate value from the optimizer step in one kernel.

Only the op call lives here. Which schedules have an op implementation, and how a schedule is
chosen and parameterised, is decided in :mod:`tf_nmt.training.schedules` (its ``"op"`` registry).
The kernel runs on the CPU (the step and the value are scalars in host memory).
"""
from __future__ import annotations

from tf_nmt.compat import tf
from tf_nmt.ops.loader import load_ops


def nmt_learning_rate(step, schedule: str, peak_lr: float, warmup_steps: float) -> tf.Tensor:
    """The op's value of ``schedule`` at the 0-based ``step`` (int32, int64 or float32 scalar)."""
    step = tf.convert_to_tensor(step)
    if step.dtype not in (tf.int32, tf.int64, tf.float32):
        step = tf.cast(step, tf.float32)
    return load_ops().nmt_learning_rate(step, schedule=schedule, peak_lr=float(peak_lr),
                                        warmup_steps=float(warmup_steps))
