"""Real ``horovodrun -np 2`` (Gloo): a time budget stops every rank after the same step, and a
timed cool-down gives every rank the same learning rate (the ranks agree on the time)."""
import pytest

from tests.parallel import launch

pytestmark = [pytest.mark.parallel, pytest.mark.slow]

if not launch.horovod_importable():
    pytest.skip("horovod.tensorflow is not importable: build it with scripts/install_horovod.sh",
                allow_module_level=True)


def test_ranks_stop_together_and_cool_down_alike(tmp_path):
    results = launch.horovodrun("time_budget.py", tmp_path, controller="gloo", np=2, timeout=400)
    steps = {rank: res["final_step"] for rank, res in results.items()}
    assert steps[0] == steps[1] and 5 < steps[0] < 1_000_000, steps
    assert results[0]["stopped"] and results[1]["stopped"]
    assert results[0]["lr"] == results[1]["lr"]  # the same rate at every logged step
    base = lambda s: 1e-3 * min(s / 400, (400 / s) ** 0.5)  # noqa: E731 - the default schedule
    ratios = [lr / base(step) for step, lr in results[0]["lr"]]
    # by steps the run has barely begun, so only the agreed clock brings the rate down
    assert ratios[0] > 0.5 and ratios[-1] < 0.4
