"""Exact resume under a real ``horovodrun -np 2`` (Gloo), in every comm mode with state of its own
(graddrop with and without local gradients, BMUF, fedavg) and in sparse_as_dense: runs stopped at
step 5 and resumed end bit-identical to the same runs trained straight to 8.

One launch, three tiny ``train`` calls per mode (see workers/resume.py).
"""
import pytest

from tests.parallel import launch
from tests.parallel.workers.resume import MODES, RANK_STATE, STEPS, STOP

pytestmark = [pytest.mark.keras2, pytest.mark.parallel, pytest.mark.slow,
              pytest.mark.skipif(not launch.horovod_importable(), reason="horovod.tensorflow is "
                                 "not importable: build it with scripts/install_horovod.sh")]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("resume")
    return launch.horovodrun("resume.py", out, controller="gloo", timeout=600)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_interrupted_run_resumes_bit_identical_on_every_rank(results, mode):
    for rank in (0, 1):
        got = results[rank][mode]
        assert (got["first_final"], got["resumed_from"], got["final"]) == (STOP, STOP, STEPS)
        if mode not in RANK_STATE:  # one model: the chief's checkpoint, restored by every rank
            assert got["rank_dirs"] == [] and got["rank_state"] is None
            continue
        assert got["rank_dirs"] == ["rank-0", "rank-1"]
        state = got["rank_state"]
        assert state["only_one_side"] == [] and state["max_abs_diff"] == 0.0, (rank, state["worst"])
    chief = results[0][mode]["chief"]
    assert chief["only_one_side"] == [] and chief["max_abs_diff"] == 0.0, chief["worst"]


def test_rank_checkpoints_hold_what_each_rank_needs(results):
    names = results[0]["graddrop_local"]["rank_state"]["names"]
    assert any("gd_residual" in n for n in names), "GradDrop residuals are not checkpointed"
    bmuf = results[0]["bmuf"]["rank_state"]["names"]
    assert any(n.startswith("comm/global_params") for n in bmuf)
    assert any(n.startswith("comm/delta") for n in bmuf)
    assert any("gd_residual" in n for n in results[0]["graddrop"]["rank_state"]["names"])
    # step 8 is between two averages (6, 9), and residuals are per rank: the ranks' states differ
    for mode in RANK_STATE:
        assert results[0][mode]["ranks_differ"] > 1e-6, mode
    assert all("ranks_differ" not in results[0][m] for m in MODES if m not in RANK_STATE)
