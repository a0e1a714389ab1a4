"""Learning-rate schedules, and the one place where a run's schedule is decided.

:func:`from_config` is what every trainer calls: it applies the worker-scaling rule
(:func:`worker_scaled`), drops the warm-up of a transfer-learning child when asked
(``train.init_warmup=false``), picks the implementation (``train.schedule_implementation``:
``python`` or the C++ ``op``) from the registry :data:`SCHEDULES`, and passes each schedule the
parameters its constructor names, taken from the config.

Formulas (``s = max(step, 1)``, ``step`` counted from 0 as Keras optimizers do, so s = step + 1):

* ``warmup_inverse_sqrt``: ``peak_lr * min(s / warmup_steps, sqrt(warmup_steps / s))`` — linear
  warm-up to ``peak_lr`` at ``warmup_steps``, then inverse-square-root decay (Vaswani et al.).
* ``inverse_sqrt``: ``peak_lr * sqrt(warmup_steps / max(s, warmup_steps))`` — constant, then decay.
* ``linear_warmup``: ``peak_lr * min(1, s / warmup_steps)``.
* ``step_decay`` (Luong et al.): ``peak_lr`` until ``decay_start``, then multiplied by
  ``decay_factor`` once every ``decay_every`` steps: ``peak_lr * decay_factor ** n`` with
  ``n = 1 + floor((s - decay_start) / decay_every)`` for ``s > decay_start``.
* ``constant``: ``peak_lr``.

Any of them may end in a **cool-down** (``train.cooldown_fraction=F``, 0 = off): the rate is
multiplied by ``clip((1 - p) / F, 0, 1)``, a linear fall to 0 over the last fraction ``F`` of the
run, where the run's progress ``p = max(step / train_steps, elapsed / time budget)``. The time
term (``train.time_budget_minutes``) lets a run that stops on its clock, like the quickstart, end
its decay when the budget does; :class:`tf_nmt.training.callbacks.TimeBudget` sets it after each
step (every ``log_every`` steps, to the time the ranks agree on, under Horovod); it restarts with
the budget when a run is resumed. Annealing to zero at the end of a fixed
budget is the "trapezoidal" or warm-up-stable-decay schedule; a constant rate with a cool-down
is that schedule exactly.

``implementation="op"`` selects the C++ kernel version (``tf_nmt.ops.lr_schedule``) of the
schedules it implements; both agree to float tolerance (tests check this).

Worker scaling (Goyal et al., 2017): with ``N`` workers each step averages gradients over an
``N`` times larger batch, so ``peak_lr`` is multiplied by ``N`` and the warm-up, counted in
optimizer steps that now see ``N`` times more data, becomes ``max(1, ceil(warmup_steps / N))``.
``train.scale_lr_with_workers=false`` turns the rule off.
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Dict, Mapping, Optional, Tuple

from tf_nmt.compat import keras, tf
from tf_nmt.config import ConfigError, TrainConfig
from tf_nmt.modes import WITHOUT_WARMUP
from tf_nmt.ops.loader import load_ops
from tf_nmt.ops.lr_schedule import nmt_learning_rate


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


class _OpSchedule(_WarmupSchedule):
    """A warm-up schedule evaluated by the fused C++ ``NmtLearningRate`` op (host memory)."""

    op_name = ""

    def __init__(self, peak_lr: float, warmup_steps: int) -> None:
        super().__init__(peak_lr, warmup_steps)
        load_ops()  # fail here, with the build hint, if the library is missing

    def __call__(self, step):
        return nmt_learning_rate(step, self.op_name, self.peak_lr, self.warmup_steps)


class OpWarmupInverseSqrt(_OpSchedule):
    """:class:`WarmupInverseSqrt` computed by the C++ op."""

    op_name = "warmup_inverse_sqrt"


class OpInverseSqrt(_OpSchedule):
    """:class:`InverseSqrt` computed by the C++ op."""

    op_name = "inverse_sqrt"


class OpLinearWarmup(_OpSchedule):
    """:class:`LinearWarmup` computed by the C++ op."""

    op_name = "linear_warmup"


class Cooldown(keras.optimizers.schedules.LearningRateSchedule):
    """``base`` multiplied by ``clip((1 - p) / fraction, 0, 1)``: a linear fall to 0 over the
    last ``fraction`` of the run.

    Args:
        base: the schedule to cool down.
        fraction: the share of the run the fall takes, in (0, 1].
        total_steps: the run's length in steps; ``p`` is at least ``step / total_steps``.
        timed: also follow a clock: ``p`` is at least :attr:`clock` (a variable in [0, 1] that
            :class:`tf_nmt.training.callbacks.TimeBudget` sets to elapsed / budget).

    Example:
        >>> lr = Cooldown(WarmupInverseSqrt(2e-3, 300), fraction=0.25, total_steps=4000)
    """

    def __init__(self, base: keras.optimizers.schedules.LearningRateSchedule, fraction: float,
                 total_steps: int, timed: bool = False) -> None:
        super().__init__()
        if not 0.0 < fraction <= 1.0:
            raise ValueError(f"cooldown_fraction must be in (0, 1] (0 turns it off), got {fraction}")
        if total_steps < 1:
            raise ValueError(f"train_steps must be >= 1 for a cool-down, got {total_steps}")
        self.base, self.fraction, self.total_steps = base, float(fraction), int(total_steps)
        self.clock: Optional[tf.Variable] = (
            tf.Variable(0.0, trainable=False, dtype=tf.float32, name="cooldown_clock")
            if timed else None)

    def progress(self, step) -> tf.Tensor:
        """The run's progress ``p`` in [0, 1] at optimizer step ``step`` (0-based)."""
        p = tf.cast(step, tf.float32) / float(self.total_steps)
        if self.clock is not None:
            p = tf.maximum(p, self.clock.read_value())
        return tf.clip_by_value(p, 0.0, 1.0)

    def __call__(self, step):
        factor = tf.clip_by_value((1.0 - self.progress(step)) / self.fraction, 0.0, 1.0)
        return self.base(step) * factor

    def get_config(self) -> Dict[str, Any]:
        return {"base": keras.optimizers.schedules.serialize(self.base),
                "fraction": self.fraction, "total_steps": self.total_steps,
                "timed": self.clock is not None}


def cooldown_clock(schedule: Any) -> Optional[tf.Variable]:
    """The clock variable of a timed :class:`Cooldown` (None for any other schedule)."""
    return schedule.clock if isinstance(schedule, Cooldown) else None


ScheduleClass = type
# implementation -> schedule name -> class. The constructor's parameter names say which config
# values a schedule takes (see from_config).
SCHEDULES: Dict[str, Dict[str, ScheduleClass]] = {
    "python": {"warmup_inverse_sqrt": WarmupInverseSqrt, "inverse_sqrt": InverseSqrt,
               "linear_warmup": LinearWarmup, "step_decay": StepDecay, "constant": Constant},
    "op": {"warmup_inverse_sqrt": OpWarmupInverseSqrt, "inverse_sqrt": OpInverseSqrt,
           "linear_warmup": OpLinearWarmup},
}
# What a schedule becomes when its warm-up is dropped (the same curve without the linear ramp):
# tf_nmt.modes.WITHOUT_WARMUP.


def schedule_class(name: str, implementation: str = "python") -> ScheduleClass:
    """The registered class of schedule ``name`` (ValueError for unknown names/implementations)."""
    if implementation not in SCHEDULES:
        raise ValueError(f"unknown schedule implementation {implementation!r}; "
                         f"use one of {sorted(SCHEDULES)}")
    registry = SCHEDULES[implementation]
    if name not in registry:
        known = sorted(SCHEDULES["python"])
        if implementation != "python" and name in SCHEDULES["python"]:
            raise ValueError(f"schedule {name!r} has no {implementation!r} implementation; "
                             f"choose from {sorted(registry)} or implementation 'python'")
        raise ValueError(f"unknown schedule {name!r}; choose from {known}")
    return registry[name]


def build_schedule(name: str, implementation: str = "python",
                   **params: float) -> keras.optimizers.schedules.LearningRateSchedule:
    """Schedule ``name`` built from explicit ``params`` (for callers without a config)."""
    return schedule_class(name, implementation)(**params)


def scale_lr(base_lr: float, size: int) -> float:
    """The linear scaling rule: ``base_lr * size``."""
    if size < 1:
        raise ValueError(f"world size must be >= 1, got {size}")
    return float(base_lr) * size


def scale_warmup(warmup_steps: int, size: int) -> int:
    """The warm-up in steps of a ``size`` times larger batch: ``max(1, ceil(warmup / size))``."""
    if size < 1:
        raise ValueError(f"world size must be >= 1, got {size}")
    return max(1, math.ceil(warmup_steps / size))


def worker_scaled(t: TrainConfig, world_size: int) -> Tuple[float, int]:
    """(peak LR, warm-up steps) a run of ``world_size`` workers uses under ``t``."""
    if not t.scale_lr_with_workers:
        return float(t.peak_lr), int(t.warmup_steps)
    return scale_lr(t.peak_lr, world_size), scale_warmup(t.warmup_steps, world_size)


def schedule_name(t: TrainConfig) -> str:
    """``train.schedule``, or its warm-up-free form for a transfer child with ``init_warmup=false``."""
    if t.init_from and not t.init_warmup:
        return WITHOUT_WARMUP.get(t.schedule, t.schedule)
    return t.schedule


def schedule_params(t: TrainConfig, world_size: int) -> Dict[str, Any]:
    """Every value a schedule constructor may name, from ``t`` after worker scaling."""
    peak_lr, warmup = worker_scaled(t, world_size)
    return {"peak_lr": peak_lr, "warmup_steps": warmup, "decay_start": t.decay_start,
            "decay_every": t.decay_every, "decay_factor": t.decay_factor}


def _takes(cls: ScheduleClass, values: Mapping[str, Any]) -> Dict[str, Any]:
    names = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    return {name: values[name] for name in names}


def from_config(t: TrainConfig, world_size: int = 1) -> keras.optimizers.schedules.LearningRateSchedule:
    """The learning-rate schedule of a run with ``world_size`` workers configured by ``t``.

    With ``train.cooldown_fraction`` it is wrapped in a :class:`Cooldown` (timed when the run
    has ``train.time_budget_minutes``). Raises ConfigError for an unknown schedule or
    implementation, or bad parameters.
    """
    try:
        cls = schedule_class(schedule_name(t), t.schedule_implementation)
        schedule = cls(**_takes(cls, schedule_params(t, world_size)))
    except ValueError as err:
        raise ConfigError(f"train.schedule={t.schedule!r} "
                          f"(implementation {t.schedule_implementation!r}): {err}") from err
    if not t.cooldown_fraction:
        return schedule
    try:
        return Cooldown(schedule, t.cooldown_fraction, t.train_steps,
                        timed=t.time_budget_minutes > 0)
    except ValueError as err:
        raise ConfigError(f"train.cooldown_fraction={t.cooldown_fraction!r}: {err}") from err
