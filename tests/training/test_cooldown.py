"""The cool-down's clock: TimeBudget sets it from elapsed time, and a run's rate ends at 0."""
import pytest

from tests.helpers import write_toy_data_dir
from tf_nmt.compat import tf
from tf_nmt.config import load_config
from tf_nmt.training import callbacks as cb
from tests.training.test_trainer import TINY


class _Model:
    stop_training = False


def test_time_budget_sets_the_clock_to_the_share_spent(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(cb.time, "perf_counter", lambda: now[0])
    clock = tf.Variable(0.7, trainable=False)
    budget = cb.TimeBudget(10.0, log=lambda _m: None, clock=clock)  # 600 s
    budget.set_model(_Model())
    budget.on_train_begin()
    assert float(clock) == 0.0  # a resumed run's budget starts afresh, so does its clock
    now[0] += 150.0
    budget.on_train_batch_begin(0)
    assert float(clock) == pytest.approx(0.25)
    now[0] += 600.0
    budget.on_train_batch_begin(1)
    assert float(clock) == 1.0  # never past the end
    budget.on_train_batch_end(1)
    assert budget.stopped_early and budget.model.stop_training


def test_a_clock_without_a_budget_is_refused():
    with pytest.raises(ValueError, match="time budget"):
        cb.TimeBudget(0.0, clock=tf.Variable(0.0))


@pytest.mark.slow
def test_a_cooled_run_ends_at_a_rate_near_zero_and_still_learns(tmp_path):
    from tf_nmt.training.trainer import train

    data = write_toy_data_dir(tmp_path / "data")
    cfg = load_config(None, TINY + [f"data.data_dir={data}", "train.train_steps=40",
                                    "train.steps_per_cycle=20", "train.cooldown_fraction=0.5"])
    result = train(cfg, tmp_path / "run", log=lambda _m: None)
    lr = {h["step"]: h["lr"] for h in result.history}
    # warmup_inverse_sqrt at peak 3e-3, warm-up 10; the log reads the rate of the step just taken
    base = lambda s: 3e-3 * min(s / 10, (10 / s) ** 0.5)  # noqa: E731
    assert lr[20] == pytest.approx(base(20), rel=1e-4)  # before the fall (p = 19/40 < 0.5)
    assert lr[40] == pytest.approx(base(40) * (1 - 39 / 40) / 0.5, rel=1e-3)
    losses = [h["loss"] for h in result.history]
    assert losses[-1] < 0.7 * losses[0]


@pytest.mark.slow
def test_a_time_budgeted_run_cools_down_by_its_clock(tmp_path):
    from tf_nmt.training.trainer import train

    data = write_toy_data_dir(tmp_path / "data")
    cfg = load_config(None, TINY + [f"data.data_dir={data}", "train.train_steps=1000000",
                                    "train.steps_per_cycle=10", "train.log_every=1",
                                    "train.time_budget_minutes=0.1",
                                    "train.cooldown_fraction=1.0"])
    result = train(cfg, tmp_path / "run", log=lambda _m: None)
    assert result.stopped_by_time_budget
    base = lambda s: 3e-3 * min(s / 10, (10 / s) ** 0.5)  # noqa: E731
    ratios = [h["lr"] / base(h["step"]) for h in result.history]
    # by steps the run has barely begun (p < 1e-3), so only the clock can bring the rate down
    assert ratios[-1] < 0.2 and all(a >= b for a, b in zip(ratios, ratios[1:]))
