"""Learning-rate schedules against their closed-form formulas, and the one config entry point."""
import dataclasses

import pytest

from tests.ops.reference import lr_schedule_value
from tf_nmt.config import ConfigError, TrainConfig
from tf_nmt.training import schedules
from tf_nmt.training.schedules import build_schedule, from_config

CASES = [
    ("warmup_inverse_sqrt", dict(peak_lr=1e-3, warmup_steps=100)),
    ("inverse_sqrt", dict(peak_lr=5e-4, warmup_steps=50)),
    ("linear_warmup", dict(peak_lr=2e-3, warmup_steps=30)),
    ("step_decay", dict(peak_lr=1.0, decay_start=100, decay_every=25, decay_factor=0.5)),
    ("constant", dict(peak_lr=0.1)),
]
STEPS = [0, 1, 10, 29, 30, 49, 99, 100, 101, 124, 125, 1000, 123456]


@pytest.mark.parametrize("name,params", CASES)
def test_matches_formula(name, params):
    schedule = build_schedule(name, **params)
    for step in STEPS:
        assert float(schedule(step)) == pytest.approx(lr_schedule_value(name, step, **params), rel=1e-5)


def test_warmup_peaks_at_warmup_steps():
    schedule = build_schedule("warmup_inverse_sqrt", peak_lr=1e-3, warmup_steps=100)
    values = [float(schedule(s)) for s in range(300)]
    assert max(values) == pytest.approx(1e-3, rel=1e-6)
    assert values.index(max(values)) == 99  # step 99 is the 100th update


def test_unknown_names_and_bad_params():
    with pytest.raises(ValueError, match="unknown schedule"):
        build_schedule("cosine", peak_lr=1.0)
    with pytest.raises(ValueError, match="implementation"):
        build_schedule("constant", implementation="cuda", peak_lr=1.0)
    with pytest.raises(ValueError, match="no 'op' implementation"):
        build_schedule("step_decay", implementation="op", peak_lr=1.0, decay_start=1, decay_every=1)
    with pytest.raises(ValueError, match="warmup_steps"):
        build_schedule("warmup_inverse_sqrt", peak_lr=1.0, warmup_steps=0)


@pytest.mark.parametrize("size, lr", [(1, 0.5), (2, 1.0), (8, 4.0)])
def test_scale_lr_is_linear(size, lr):
    assert schedules.scale_lr(0.5, size) == pytest.approx(lr)


@pytest.mark.parametrize("warmup, size, expected", [(4000, 1, 4000), (4000, 2, 2000),
                                                     (4000, 3, 1334), (1, 8, 1), (0, 4, 1)])
def test_scale_warmup_ceil_at_least_one(warmup, size, expected):
    assert schedules.scale_warmup(warmup, size) == expected


def test_bad_world_size():
    with pytest.raises(ValueError):
        schedules.scale_lr(0.1, 0)
    with pytest.raises(ValueError):
        schedules.scale_warmup(10, 0)


def _train(**kw) -> TrainConfig:
    return dataclasses.replace(TrainConfig(), **kw)


@pytest.mark.parametrize("scale, expected", [(True, (4e-3, 75)), (False, (1e-3, 300))])
def test_worker_scaled_honours_the_switch(scale, expected):
    t = _train(peak_lr=1e-3, warmup_steps=300, scale_lr_with_workers=scale)
    assert schedules.worker_scaled(t, 4) == pytest.approx(expected)


def test_from_config_scales_with_workers():
    t = _train(peak_lr=1e-3, warmup_steps=300)
    four = from_config(t, world_size=4)
    assert isinstance(four, schedules.WarmupInverseSqrt)
    assert four.get_config() == {"peak_lr": 4e-3, "warmup_steps": 75}
    for step in STEPS:
        assert float(four(step)) == pytest.approx(
            lr_schedule_value("warmup_inverse_sqrt", step, peak_lr=4e-3, warmup_steps=75), rel=1e-5)
    assert from_config(t).get_config() == {"peak_lr": 1e-3, "warmup_steps": 300}


def test_from_config_passes_what_the_constructor_names():
    t = _train(schedule="step_decay", peak_lr=0.5, decay_start=10, decay_every=5, decay_factor=0.25)
    sched = from_config(t, world_size=2)
    assert sched.get_config() == {"peak_lr": 1.0, "decay_start": 10, "decay_every": 5,
                                  "decay_factor": 0.25}
    assert from_config(_train(schedule="constant", peak_lr=0.3)).get_config() == {"peak_lr": 0.3}


@pytest.mark.parametrize("name, init_from, init_warmup, expected", [
    ("warmup_inverse_sqrt", "runs/p", False, schedules.InverseSqrt),
    ("linear_warmup", "runs/p", False, schedules.Constant),
    ("warmup_inverse_sqrt", "runs/p", True, schedules.WarmupInverseSqrt),
    ("warmup_inverse_sqrt", "", False, schedules.WarmupInverseSqrt),
    ("step_decay", "runs/p", False, schedules.StepDecay),
])
def test_transfer_child_without_warmup(name, init_from, init_warmup, expected):
    t = _train(schedule=name, init_from=init_from, init_warmup=init_warmup)
    assert type(from_config(t)) is expected


def test_from_config_errors_are_config_errors():
    with pytest.raises(ConfigError, match="cosine"):
        from_config(_train(schedule="cosine"))
    with pytest.raises(ConfigError, match="no 'op' implementation"):
        from_config(_train(schedule="step_decay", schedule_implementation="op"))
    with pytest.raises(ConfigError, match="warmup_steps"):
        from_config(_train(warmup_steps=0, scale_lr_with_workers=False))


def test_cooldown_falls_linearly_to_zero_over_the_last_fraction():
    base = build_schedule("constant", peak_lr=0.1)
    schedule = schedules.Cooldown(base, fraction=0.25, total_steps=100)
    assert float(schedule(0)) == pytest.approx(0.1)
    assert float(schedule(75)) == pytest.approx(0.1)  # p = 0.75: the fall starts here
    assert float(schedule(80)) == pytest.approx(0.1 * 0.2 / 0.25)
    assert float(schedule(99)) == pytest.approx(0.1 * 0.01 / 0.25)
    assert float(schedule(100)) == 0.0 and float(schedule(150)) == 0.0
    # It multiplies whatever the base gives at that step.
    warm = build_schedule("warmup_inverse_sqrt", peak_lr=1e-3, warmup_steps=10)
    cooled = schedules.Cooldown(warm, fraction=0.5, total_steps=40)
    for step in (0, 5, 19, 20, 30, 39):
        factor = min(1.0, (1 - step / 40) / 0.5)
        assert float(cooled(step)) == pytest.approx(float(warm(step)) * factor, rel=1e-5)


def test_timed_cooldown_follows_the_clock_when_it_is_further_along():
    schedule = schedules.Cooldown(build_schedule("constant", peak_lr=1.0), fraction=0.5,
                                  total_steps=1000, timed=True)
    clock = schedules.cooldown_clock(schedule)
    assert clock is not None and float(clock) == 0.0
    assert float(schedule(10)) == pytest.approx(1.0)
    clock.assign(0.8)  # 80% of the time budget spent at step 10
    assert float(schedule(10)) == pytest.approx(0.4)
    clock.assign(0.1)  # the steps are further along than the clock
    assert float(schedule(900)) == pytest.approx(0.2)
    clock.assign(1.0)
    assert float(schedule(10)) == 0.0
    untimed = schedules.Cooldown(build_schedule("constant", peak_lr=1.0), 0.5, 1000)
    assert schedules.cooldown_clock(untimed) is None
    assert schedules.cooldown_clock(build_schedule("constant", peak_lr=1.0)) is None


def test_from_config_adds_the_cooldown_and_checks_it():
    assert not isinstance(from_config(_train()), schedules.Cooldown)
    cooled = from_config(_train(cooldown_fraction=0.3, train_steps=500))
    assert isinstance(cooled, schedules.Cooldown) and cooled.clock is None
    assert isinstance(cooled.base, schedules.WarmupInverseSqrt)
    assert (cooled.fraction, cooled.total_steps) == (0.3, 500)
    timed = from_config(_train(cooldown_fraction=0.3, time_budget_minutes=45.0))
    assert schedules.cooldown_clock(timed) is not None
    # the op implementation cools down too
    op = from_config(_train(cooldown_fraction=0.5, schedule_implementation="op"))
    assert isinstance(op.base, schedules.OpWarmupInverseSqrt)
    for bad in (-0.1, 1.5):
        with pytest.raises(ConfigError, match="cooldown_fraction"):
            from_config(_train(cooldown_fraction=bad))
    assert set(from_config(_train(cooldown_fraction=0.2)).get_config()) == {
        "base", "fraction", "total_steps", "timed"}
