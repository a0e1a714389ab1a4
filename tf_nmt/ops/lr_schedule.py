"""Keras LearningRateSchedules backed by the C++ ``NmtLearningRate`` op.

Same formulas as :mod:`tf_nmt.training.schedules` (which picks this via
``build_schedule(name, implementation="op", ...)``); tests check both agree.
"""
from __future__ import annotations

from typing import Any, Dict

from tf_nmt.compat import keras, tf
from tf_nmt.ops.loader import load_ops

OP_SCHEDULES = ("warmup_inverse_sqrt", "inverse_sqrt", "linear_warmup")


class OpSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """LR schedule ``name`` evaluated by one fused op from the (0-based) optimizer step."""

    def __init__(self, name: str, peak_lr: float, warmup_steps: int) -> None:
        super().__init__()
        if name not in OP_SCHEDULES:
            raise ValueError(f"no op implementation for schedule {name!r}; choose from {OP_SCHEDULES}")
        if warmup_steps < 1:
            raise ValueError(f"warmup_steps must be >= 1, got {warmup_steps}")
        self.name, self.peak_lr, self.warmup_steps = name, float(peak_lr), int(warmup_steps)
        load_ops()  # fail early with the build hint if the library is missing

    def __call__(self, step):
        step = tf.convert_to_tensor(step)
        if step.dtype not in (tf.int32, tf.int64, tf.float32):
            step = tf.cast(step, tf.float32)
        return load_ops().nmt_learning_rate(step, schedule=self.name, peak_lr=self.peak_lr,
                                            warmup_steps=float(self.warmup_steps))

    def get_config(self) -> Dict[str, Any]:
        return {"name": self.name, "peak_lr": self.peak_lr, "warmup_steps": self.warmup_steps}


def build_op_schedule(name: str, **params: float) -> OpSchedule:
    """The op-backed schedule ``name`` (ValueError for schedules without an op version)."""
    if name not in OP_SCHEDULES:
        raise ValueError(f"no op implementation for schedule {name!r}; choose from {OP_SCHEDULES}")
    return OpSchedule(name, **params)
