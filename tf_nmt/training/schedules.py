"""Learning-rate schedules, and the one place where a schedule is chosen (:func:`build_schedule`).

Formulas (``s = max(step, 1)``, ``step`` counted from 0 as Keras optimizers do, so s = step + 1):

* ``warmup_inverse_sqrt``: ``peak_lr * min(s / warmup_steps, sqrt(warmup_steps / s))`` — linear
  warm-up to ``peak_lr`` at ``warmup_steps``, then inverse-square-root decay (Vaswani et al.).
* ``inverse_sqrt``: ``peak_lr * sqrt(warmup_steps / max(s, warmup_steps))`` — constant, then decay.
* ``linear_warmup``: ``peak_lr * min(1, s / warmup_steps)``.
* ``step_decay`` (Luong et al.): ``peak_lr`` until ``decay_start``, then multiplied by
  ``decay_factor`` once every ``decay_every`` steps: ``peak_lr * decay_factor ** n`` with
  ``n = 1 + floor((s - decay_start) / decay_every)`` for ``s > decay_start``.
* ``constant``: ``peak_lr``.

``implementation="op"`` selects the C++ kernel version (``tf_nmt.ops.lr_schedule``) of the
schedules it implements; both must agree to float tolerance (tests check this).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict

from tf_nmt.compat import keras, tf


def _position(step: tf.Tensor) -> tf.Tensor:
    """1-based step as float32 (Keras passes the 0-based optimizer iteration count)."""
    return tf.maximum(tf.cast(step, tf.float32) + 1.0, 1.0)


class _Schedule(keras.optimizers.schedules.LearningRateSchedule):
    """Shared get_config for schedules whose constructor arguments are all floats/ints."""

    def __init__(self, **params: float) -> None:
        super().__init__()
        self._params = dict(params)

    def get_config(self) -> Dict[str, Any]:
        return dict(self._params)


class _WarmupSchedule(_Schedule):
    """A schedule parameterised by ``peak_lr`` and ``warmup_steps`` (validated once, here)."""

    def __init__(self, peak_lr: float, warmup_steps: int) -> None:
        if warmup_steps < 1:
            raise ValueError(f"warmup_steps must be >= 1, got {warmup_steps}")
        super().__init__(peak_lr=float(peak_lr), warmup_steps=int(warmup_steps))
        self.peak_lr, self.warmup_steps = float(peak_lr), float(warmup_steps)


class WarmupInverseSqrt(_WarmupSchedule):
    """Linear warm-up to ``peak_lr`` over ``warmup_steps``, then ``1/sqrt(step)`` decay."""

    def __call__(self, step):
        s = _position(step)
        return self.peak_lr * tf.minimum(s / self.warmup_steps, tf.sqrt(self.warmup_steps / s))


class InverseSqrt(_WarmupSchedule):
    """Constant ``peak_lr`` for ``warmup_steps``, then ``1/sqrt(step)`` decay (no warm-up)."""

    def __call__(self, step):
        s = _position(step)
        return self.peak_lr * tf.sqrt(self.warmup_steps / tf.maximum(s, self.warmup_steps))


class LinearWarmup(_WarmupSchedule):
    """Linear warm-up to ``peak_lr`` over ``warmup_steps``, constant afterwards."""

    def __call__(self, step):
        s = _position(step)
        return self.peak_lr * tf.minimum(1.0, s / self.warmup_steps)


class StepDecay(_Schedule):
    """Luong-style decay: constant, then multiplied by ``decay_factor`` every ``decay_every``."""

    def __init__(self, peak_lr: float, decay_start: int, decay_every: int, decay_factor: float = 0.5) -> None:
        if decay_every < 1:
            raise ValueError(f"decay_every must be >= 1, got {decay_every}")
        if not 0.0 < decay_factor <= 1.0:
            raise ValueError(f"decay_factor must be in (0, 1], got {decay_factor}")
        super().__init__(peak_lr=float(peak_lr), decay_start=int(decay_start),
                         decay_every=int(decay_every), decay_factor=float(decay_factor))
        self.peak_lr, self.decay_start = float(peak_lr), float(decay_start)
        self.decay_every, self.decay_factor = float(decay_every), float(decay_factor)

    def __call__(self, step):
        s = _position(step)
        n = tf.where(s > self.decay_start,
                     1.0 + tf.floor((s - self.decay_start) / self.decay_every), 0.0)
        return self.peak_lr * tf.pow(self.decay_factor, n)


class Constant(_Schedule):
    """A constant learning rate (useful for tests and fine-tuning)."""

    def __init__(self, peak_lr: float) -> None:
        super().__init__(peak_lr=float(peak_lr))
        self.peak_lr = float(peak_lr)

    def __call__(self, step):
        return tf.fill([], tf.constant(self.peak_lr, tf.float32)) + 0.0 * tf.cast(step, tf.float32)


PYTHON_SCHEDULES: Dict[str, Callable[..., keras.optimizers.schedules.LearningRateSchedule]] = {
    "warmup_inverse_sqrt": WarmupInverseSqrt,
    "inverse_sqrt": InverseSqrt,
    "linear_warmup": LinearWarmup,
    "step_decay": StepDecay,
    "constant": Constant,
}


def reference_value(name: str, step: int, **params: float) -> float:
    """Plain-Python value of schedule ``name`` at 0-based ``step`` (the formula, for tests)."""
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


def build_schedule(name: str, implementation: str = "python", **params: float):
    """Return the Keras LearningRateSchedule ``name`` built from ``params``.

    ``implementation`` is ``"python"`` (TF ops composed in Python) or ``"op"`` (the fused C++
    kernel from ``tf_nmt.ops``; needs the compiled custom-op library).
    """
    if implementation == "python":
        if name not in PYTHON_SCHEDULES:
            raise ValueError(f"unknown schedule {name!r}; choose from {sorted(PYTHON_SCHEDULES)}")
        return PYTHON_SCHEDULES[name](**params)
    if implementation == "op":
        from tf_nmt.ops import lr_schedule  # imported lazily: needs the compiled library

        return lr_schedule.build_op_schedule(name, **params)
    raise ValueError(f"unknown schedule implementation {implementation!r}; use 'python' or 'op'")
