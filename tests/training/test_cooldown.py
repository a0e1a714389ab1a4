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
    budget.on_train_batch_end(0)
    assert float(clock) == pytest.approx(0.25) and not budget.model.stop_training
    now[0] += 600.0
    budget.on_train_batch_end(1)
    assert float(clock) == 1.0  # never past the end
    assert budget.stopped_early and budget.model.stop_training


def test_ranks_stop_and_cool_by_the_time_they_agree_on(monkeypatch):
    """With ``agree`` the decision and the clock follow the agreed time, every ``every`` batches
    only, so every rank stops after the same batch and uses the same rate."""
    now = [0.0]
    monkeypatch.setattr(cb.time, "perf_counter", lambda: now[0])
    calls = []

    def agree(local):  # a peer rank is 30 s behind: the mean is 15 s less than ours
        calls.append(local)
        return local - 15.0

    clock = tf.Variable(0.0, trainable=False)
    budget = cb.TimeBudget(1.0, log=lambda _m: None, clock=clock, agree=agree, every=3)
    budget.set_model(_Model())
    budget.on_train_begin()
    for batch in range(5):  # 14 s per batch; the agreement runs after batches 3 and 6 only
        now[0] += 14.0
        budget.on_train_batch_end(batch)
    assert calls == [42.0] and float(clock) == pytest.approx(27.0 / 60.0)
    now[0] += 14.0  # local 84 s is past the 60 s budget, but the agreed 69 s decides
    budget.on_train_batch_end(5)
    assert calls == [42.0, 84.0] and budget.model.stop_training
    assert float(clock) == 1.0
    with pytest.raises(ValueError, match="every"):
        cb.TimeBudget(1.0, every=0)


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
