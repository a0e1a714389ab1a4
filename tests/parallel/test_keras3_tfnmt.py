"""tf-nmt's own Transformer on Keras 3 (``TF_NMT_KERAS=3`` in the ranks' environment) under a
real ``horovodrun -np 2`` (Gloo), trained through the trainer's pieces (``build_and_compile``,
``comm.wrap_optimizer``, ``comm.comm_callbacks``) and through ``train`` itself (the resume
scenarios). One launch runs every scenario (workers/keras3_tfnmt.py).

Tolerances against the one-process reference (same start, same schedule, same samples per
update; fixed-length batches, so the mean of the two ranks' token means is the global mean):
the only difference is the float32 summation order of the gradient (two half-batch means
averaged by the allreduce instead of one mean), ~1e-7 relative. Adam divides by
``sqrt(v) + epsilon``; at the default epsilon (1e-9) a gradient that is analytically zero
(the attention key biases: softmax ignores a shift) is pure rounding noise that Adam scales to
+-lr, and one process and two ranks then differ by ~1e-2 in those biases alone (seen: 1.3e-2 in
``kv/bias``, everything else < 2e-5). The workers set ``train.epsilon=1e-3``, which bounds the
update's sensitivity to the gradient by lr / epsilon: seen 1.2e-7 on the weights after 6 updates
(and for accumulation, and BMUF(0, 1) against fedavg). ``WEIGHT_ATOL = 1e-5`` is ~100x above
that, and ~1e3x below what a rank that does not average is off by (it trains on half the data:
~1e-2, one Adam step moves a weight by up to lr = 0.02). Losses: ``LOSS_RTOL = 1e-5`` (seen
1.6e-7: float32 sums of ~50 token losses).

``KERAS3_TFNMT_PLANT=1`` makes the ranks train the sync scenarios with the plain optimizer
(the Keras 3 trap: it trains and never averages); ``test_sync_ranks_identical_and_match_one_process``
then fails.
"""
import json
import os

import numpy as np
import pytest

from tests.parallel import launch
from tests.parallel.workers.keras3_tfnmt import PLANT_VAR, RESUME_MODES, SYNC_MODES, UPDATES
from tests.parallel.workers.resume import STEPS, STOP
from experiments.lib import launcher

pytestmark = [pytest.mark.parallel, pytest.mark.slow,
              pytest.mark.skipif(not launch.horovod_importable(), reason="horovod.tensorflow is "
                                 "not importable: build it with scripts/install_horovod.sh")]

WEIGHT_ATOL = 1e-5
LOSS_RTOL = 1e-5
WORKER = launch.WORKERS / "keras3_tfnmt.py"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("keras3_tfnmt")
    env = {"TF_NMT_KERAS": "3"}  # the ranks only: this process keeps its Keras for tf-nmt
    if os.environ.get(PLANT_VAR) == "1":
        env[PLANT_VAR] = "1"
    launcher.run(WORKER, ["--out", str(out)], 2, "gloo", env=env, timeout=600, cwd=launch.REPO)
    res = {r: json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)}
    arrays = {r: dict(np.load(out / f"rank{r}.npz")) for r in (0, 1)}
    return res, arrays


def max_diff(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))))


def test_ranks_run_tf_nmt_on_keras3(runs):
    res, _ = runs
    for r in (0, 1):
        assert res[r]["size"] == 2 and res[r]["env"] == "3"
        assert res[r]["keras_version"] == 3 and res[r]["keras"].startswith("keras 3."), res[r]
        for mode in SYNC_MODES:
            info = res[r][f"sync_{mode}"]
            if not info["planted"]:
                assert info["optimizer_class"].endswith("keras3.optimizer.DistributedOptimizer")
                assert info["sparse_as_dense"] is (mode == "sparse_as_dense")
            assert info["inner_class"].startswith("keras.") and "Adam" in info["inner_class"]


@pytest.mark.parametrize("mode", SYNC_MODES)
def test_sync_ranks_identical_and_match_one_process(runs, mode):
    """Different starts, different halves of each global batch: bit-identical weights and
    optimizer state on both ranks, equal to one process on the global batches."""
    res, arrays = runs
    key = f"sync_{mode}"
    assert max_diff(arrays[0][f"{key}/init"], arrays[1][f"{key}/init"]) > 1e-2  # seeds differ
    w0, w1 = arrays[0][f"{key}/final"], arrays[1][f"{key}/final"]
    assert np.array_equal(w0, w1), f"ranks differ by {max_diff(w0, w1):.3g}"
    assert np.array_equal(arrays[0][f"{key}/optimizer"], arrays[1][f"{key}/optimizer"])
    assert res[0][key]["iterations"] == UPDATES
    ref = arrays[0][f"ref_{key}/final"]
    assert max_diff(ref, arrays[0][f"{key}/init"]) > 1e-2, "the reference did not train"
    assert max_diff(w0, ref) < WEIGHT_ATOL, max_diff(w0, ref)
    # the loss curve: the mean of the ranks' losses of each step is the global batch's loss
    curve = np.mean([res[r][key]["losses"] for r in (0, 1)], axis=0)
    np.testing.assert_allclose(curve, res[0][f"ref_{key}"]["losses"], rtol=LOSS_RTOL)
    assert res[0][key]["losses"] != res[1][key]["losses"]  # each rank saw its own half


@pytest.mark.parametrize("name", ["fedavg", "bmuf_m0_lr1", "bmuf_m0.5"])
def test_periodic_sync_leaves_ranks_identical(runs, name):
    """average_every=2: right after the syncs of steps 2 and 4 the ranks hold the same
    parameters (for fedavg, the mean of what they held before); between them they differ."""
    _, arrays = runs
    before = [arrays[r][f"{name}/before"] for r in (0, 1)]
    after = [arrays[r][f"{name}/after"] for r in (0, 1)]
    for step in (1, 3):  # steps 2 and 4
        np.testing.assert_array_equal(after[0][step], after[1][step])
        if name == "fedavg":
            np.testing.assert_allclose(after[0][step], (before[0][step] + before[1][step]) / 2,
                                       rtol=0, atol=1e-6)
    for step in (0, 2):  # local steps: each rank its own data
        assert max_diff(after[0][step], after[1][step]) > 1e-4


def test_bmuf_without_block_momentum_and_unit_block_lr_equals_model_averaging(runs):
    _, arrays = runs
    for r in (0, 1):
        fedavg = arrays[r]["fedavg/after"][-1]
        np.testing.assert_allclose(arrays[r]["bmuf_m0_lr1/after"][-1], fedavg, rtol=0, atol=1e-6)
        assert max_diff(arrays[r]["bmuf_m0.5/after"][-1], fedavg) > 1e-3


def test_accumulation_equals_one_pass_over_the_union_batch(runs):
    """backward_passes_per_step=2 on 2 ranks: each update uses 4 local batches, and equals one
    process stepping once on their union (SGD, at the same rates). ``iterations`` counts
    batches, as Horovod's Keras 2 wrapper does (train.train_steps, resume and checkpoints rely
    on it); ``count_passes=False`` would leave it at the 3 updates."""
    res, arrays = runs
    w0, w1 = arrays[0]["accumulate/final"], arrays[1]["accumulate/final"]
    assert np.array_equal(w0, w1), max_diff(w0, w1)
    ref = arrays[0]["ref_accumulate/final"]
    assert max_diff(ref, arrays[0]["accumulate/init"]) > 1e-3, "the reference did not train"
    assert max_diff(w0, ref) < WEIGHT_ATOL, max_diff(w0, ref)
    assert res[0]["accumulate"] == {"iterations": UPDATES, "backward_passes": UPDATES}


@pytest.mark.parametrize("mode", RESUME_MODES)
def test_train_resumes_bit_identical_on_keras3(runs, mode):
    """``train`` stopped at step 5 and resumed equals the run trained straight to 8, on every
    rank (bmuf: each rank's own checkpoint, W and Δ included)."""
    res, _ = runs
    for rank in (0, 1):
        got = res[rank][f"resume_{mode}"]
        assert (got["first_final"], got["resumed_from"], got["final"]) == (STOP, STOP, STEPS)
        if mode == "bmuf":
            assert got["rank_dirs"] == ["rank-0", "rank-1"]
            state = got["rank_state"]
            assert state["only_one_side"] == [] and state["max_abs_diff"] == 0.0, state["worst"]
            assert any(n.startswith("comm/global_params") for n in state["names"])
        else:
            assert got["rank_dirs"] == [] and got["rank_state"] is None
    chief = res[0][f"resume_{mode}"]["chief"]
    assert chief["only_one_side"] == [] and chief["max_abs_diff"] == 0.0, chief["worst"]
    assert any("optimizer" in n for n in chief["names"]), chief["names"][:5]
