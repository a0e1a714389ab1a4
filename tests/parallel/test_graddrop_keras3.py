"""GradDrop on Keras 3 against Keras 2, under a real ``horovodrun -np 2`` (Gloo): one launch per
Keras version (``TF_NMT_KERAS`` in the ranks' environment), the same start (weights set by
position), the same per-rank data, the trainer's pieces (workers/graddrop_keras.py).

Per scenario (residuals, local gradients with an average every 3 steps, 1-bit values) the two
versions agree step by step: every rank's loss of every step within ``LOSS_RTOL``, every final
weight within ``WEIGHT_ATOL``, and the run's accounting record (bytes sent, entries kept, union
density, drop ratio, dense fallback) equal at every step. The only difference between the
versions is float32 rounding in the layers (Keras 3's and tf_keras's Dense, LayerNormalization,
Adam): seen ~1e-7 relative in the losses and ~1e-7 in the weights after 6 steps; a planted
defect moves the losses by ~1e-3 and the weights by ~1e-3 (one Adam step moves a weight by up to
the learning rate, 0.01 here).

Exact resume on Keras 3: ``train`` stopped at step 5 and resumed equals the run trained
straight to 8, on every rank's own checkpoint (residuals included) and the chief's (Keras 2's:
tests/parallel/test_resume_exact.py).

``GRADDROP_KERAS_PLANT=residuals`` (residuals not fed back) or ``=local`` (local gradients
ignored) plants a defect in the Keras 3 launch; ``test_keras3_agrees_with_keras2_step_by_step``
then fails.
"""
import os

import numpy as np
import pytest

from tests.parallel import launch
from tests.parallel.workers.graddrop_keras import PLANT_VAR, RESUME_MODES, SCENARIOS, STEPS
from tests.parallel.workers.resume import STEPS as RESUME_STEPS, STOP

pytestmark = launch.module_marks()

LOSS_RTOL = 1e-5
WEIGHT_ATOL = 1e-5


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{keras version: ({rank: results}, {rank: final weights})}; the Keras 3 launch planted
    when ``GRADDROP_KERAS_PLANT`` is set here."""
    planted = {PLANT_VAR: os.environ[PLANT_VAR]} if os.environ.get(PLANT_VAR) else {}
    # TF_NMT_KERAS in the ranks only: this process keeps its Keras
    return {version: launch.horovodrun_with_arrays(
                "graddrop_keras.py", tmp_path_factory.mktemp(f"graddrop_keras{version}"),
                env={"TF_NMT_KERAS": version, **(planted if version == "3" else {})})
            for version in ("2", "3")}


def test_each_launch_ran_graddrop_on_its_keras(runs):
    for version, (res, _) in runs.items():
        for r in (0, 1):
            assert res[r]["size"] == 2 and res[r]["keras_version"] == int(version), res[r]
            assert res[r]["keras"].startswith("keras 3." if version == "3" else "tf_keras 2.")
            for name in SCENARIOS:
                got = res[r][name]
                assert got["exchange"] == "GradDropExchange" and got["iterations"] == STEPS
                assert got["optimizer_class"] == "ExchangeAdam"
                assert got["residuals"] == got["trainable"] == len(got["shapes"])  # all trainable


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_keras3_agrees_with_keras2_step_by_step(runs, name):
    """Same start, same data: the same losses at every step on every rank, the same final
    weights (by position) and the same residual norms, to float tolerance."""
    (k2, w2), (k3, w3) = runs["2"], runs["3"]
    for r in (0, 1):
        a, b = k2[r][name], k3[r][name]
        assert a["shapes"] == b["shapes"]  # one order in both versions: the same start
        assert len(a["losses"]) == len(b["losses"]) == STEPS
        np.testing.assert_allclose(b["losses"], a["losses"], rtol=LOSS_RTOL, atol=0)
        np.testing.assert_allclose(b["residual_norm"], a["residual_norm"], rtol=1e-4)
        keys = sorted(k for k in w2[r] if k.startswith(f"{name}/"))
        assert keys and keys == sorted(k for k in w3[r] if k.startswith(f"{name}/"))
        worst = max(keys, key=lambda k: float(np.max(np.abs(w2[r][k] - w3[r][k]))))
        diff = float(np.max(np.abs(w2[r][worst] - w3[r][worst])))
        assert diff < WEIGHT_ATOL, (r, worst, diff)
    assert k3[0][name]["losses"] != k3[1][name]["losses"]  # each rank saw its own data


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_keras3_sends_the_bytes_keras2_sends(runs, name):
    """The accounting record (comm_stats.json) of every step is the same in both versions."""
    fields = ("sent_bytes", "kept", "dense_bytes", "dense_fallback")
    for r in (0, 1):
        rec2, rec3 = runs["2"][0][r][name]["record"], runs["3"][0][r][name]["record"]
        steps2 = [{k: e[k] for k in ("step",) + fields} for e in rec2["per_step"]]
        steps3 = [{k: e[k] for k in ("step",) + fields} for e in rec3["per_step"]]
        assert len(steps2) == STEPS and steps3 == steps2
        for e2, e3 in zip(rec2["per_step"], rec3["per_step"]):
            assert e3["density"] == pytest.approx(e2["density"], rel=1e-6)
            assert e3["drop_ratio"] == pytest.approx(e2["drop_ratio"], rel=1e-6)
        assert rec3["sent_bytes_per_step"] == rec2["sent_bytes_per_step"] > 0
        assert rec3["dense_bytes_per_step"] == rec2["dense_bytes_per_step"]
        assert rec3["sent_bytes_per_step"] < rec3["dense_bytes_per_step"]


@pytest.mark.parametrize("mode", RESUME_MODES)
def test_keras3_graddrop_resumes_bit_identical(runs, mode):
    """Stopped at step 5 and resumed, as trained straight to 8: each rank's own checkpoint
    (model, Adam's moments, residuals) and the chief's, tensor by tensor."""
    res = runs["3"][0]
    for rank in (0, 1):
        got = res[rank][f"resume_{mode}"]
        assert (got["first_final"], got["resumed_from"], got["final"]) == (STOP, STOP, RESUME_STEPS)
        assert got["rank_dirs"] == ["rank-0", "rank-1"]
        state = got["rank_state"]
        assert state["only_one_side"] == [] and state["max_abs_diff"] == 0.0, (rank, state["worst"])
    chief = res[0][f"resume_{mode}"]["chief"]
    assert chief["only_one_side"] == [] and chief["max_abs_diff"] == 0.0, chief["worst"]
    # the ranks' own checkpoints differ (without local gradients the models are the same on
    # both ranks, so what differs is each rank's residuals): per-rank state is saved
    assert res[0][f"resume_{mode}"]["ranks_differ"] > 1e-6
