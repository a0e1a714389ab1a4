"""Real ``horovodrun -np 2`` (Gloo): a time budget stops every rank after the same step, and a
timed cool-down gives every rank the same learning rate (the ranks agree on the time).

The workers' budget clocks count steps at a different rate per rank (workers/time_budget.py), so
where they stop is known exactly and does not depend on how fast or loaded the machine is."""
import pytest

from tests.parallel import launch

pytestmark = [pytest.mark.parallel, pytest.mark.slow]

if not launch.horovod_importable():
    pytest.skip("horovod.tensorflow is not importable: build it with scripts/install_horovod.sh",
                allow_module_level=True)


def test_ranks_stop_together_and_cool_down_alike(tmp_path):
    results = launch.horovodrun("time_budget.py", tmp_path, controller="gloo", np=2, timeout=400)
    steps = {rank: res["final_step"] for rank, res in results.items()}
    # agreed clock: the mean of 0.2 and 0.5 s a step, checked every log_every = 5 steps; first
    # past 45 s: step 130 (alone, rank 1 would stop at 95 and rank 0 at 230)
    assert steps == {0: 130, 1: 130}, steps
    assert results[0]["stopped"] and results[1]["stopped"]
    assert results[0]["lr"] == results[1]["lr"]  # the same rate at every logged step
    base = lambda s: 1e-3 * min(s / 400, (400 / s) ** 0.5)  # noqa: E731 - the default schedule
    assert [step for step, _lr in results[0]["lr"]] == list(range(5, 131, 5))
    ratios = [lr / base(step) for step, lr in results[0]["lr"]]
    # by steps the run has barely begun (p = step / 1e6), so only the agreed clock brings the
    # rate down: the cool-down factor is 1 - clock, clock = min(1, 0.35 s * step / 45 s)
    # (relative to the first: the peak rate scales with the world size)
    expected = [max(0.0, 1 - 0.35 * step / 45) for step in range(5, 131, 5)]
    peak = ratios[0] / expected[0]
    assert [r / peak for r in ratios] == pytest.approx(expected, abs=1e-3)
