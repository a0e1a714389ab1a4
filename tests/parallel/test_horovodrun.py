"""Real 2-process Horovod runs (Gloo, and MPI when built): gradient averaging and rank sync.

Each launch trains tiny tf_keras models (Embedding → pooling → Dense, SGD) in one worker
process per rank; see workers/train_sync.py for the phases.
"""
import numpy as np
import pytest

from tests.parallel import launch

pytestmark = [pytest.mark.parallel, pytest.mark.slow]

if not launch.horovod_importable():
    pytest.skip("horovod.tensorflow is not importable: build it with scripts/install_horovod.sh",
                allow_module_level=True)

CONTROLLERS = launch.controllers()
TOL = 1e-5


def flat(params):
    return np.concatenate([np.asarray(p, dtype=np.float64) for p in params])


@pytest.fixture(scope="module", params=CONTROLLERS)
def run(request, tmp_path_factory):
    controller = request.param
    return controller, launch.horovodrun("train_sync.py", tmp_path_factory.mktemp(controller),
                                         controller=controller, env=launch.KERAS2)


def test_launch_used_requested_controller(run):
    controller, results = run
    for rank, res in results.items():
        assert res["rank"] == rank and res["size"] == 2
        assert res[controller] is True


def test_ranks_run_horovod_at_the_package_cycle_time(run):
    """distributed.init sets Horovod's cycle time (the launcher's environment sets none)."""
    from tf_nmt.distributed import context

    _, results = run
    for res in results.values():
        assert float(res["cycle_time"]) == context.DEFAULT_CYCLE_TIME_MS


@pytest.mark.parametrize("phase", ["dense", "sparse", "legacy_dense", "legacy_sparse", "tape"])
def test_two_ranks_equal_single_process_on_union_batches(run, phase):
    """Averaged gradients (dense allreduce, sparse allgather, gradient tape) give exactly the
    parameters one process gets on the union of the ranks' batches."""
    _, results = run
    reference = flat(results[0]["dense"]["reference"])
    initial = flat(results[0]["dense"]["initial"])
    assert np.abs(reference - initial).max() > 1e-2, "reference did not train"
    if phase == "tape":  # compared with the model.fit reference: same start needed
        np.testing.assert_array_equal(flat(results[0]["tape"]["initial"]), initial)
    for rank in (0, 1):
        got = flat(results[rank][phase]["params"])
        np.testing.assert_allclose(got, reference, atol=TOL, rtol=0,
                                   err_msg=f"{phase}: rank {rank} != single-process reference")


def test_gradient_accumulation_averages_over_passes_and_ranks(run):
    """backward_passes_per_step=2: one update per 2 local batches, with the mean gradient of all
    4 batches, equals a single process stepping on their union; ``iterations`` counts passes."""
    _, results = run
    reference = flat(results[0]["accumulate"]["reference"])
    assert np.abs(reference - flat(results[0]["accumulate"]["initial"])).max() > 1e-2
    for rank in (0, 1):
        np.testing.assert_allclose(flat(results[rank]["accumulate"]["params"]), reference,
                                   atol=TOL, rtol=0, err_msg=f"rank {rank}")
        assert results[rank]["accumulate"]["iterations"] == 4


def test_embedding_gradients_are_indexed_slices(run):
    _, results = run
    assert "IndexedSlices" in results[0]["tape"]["local_grad_types"]


def test_wrapped_optimizer_is_keras2(run):
    _, results = run
    for phase in ("dense", "sparse", "legacy_dense", "legacy_sparse"):
        info = results[0][phase]
        assert info["wrapped"] and info["is_tf_keras"], info["optimizer_class"]


def test_broadcast_callback_syncs_ranks(run):
    _, results = run
    a, b = results[0]["sync"], results[1]["sync"]
    assert np.abs(flat(a["initial"]) - flat(b["initial"])).max() > 1e-3, "inits were not different"
    np.testing.assert_allclose(flat(a["params"]), flat(b["params"]), atol=1e-6, rtol=0)
    np.testing.assert_allclose(flat(a["optimizer_weights"]), flat(b["optimizer_weights"]),
                               atol=0, rtol=0)
    assert abs(flat(a["params"]) - flat(a["initial"])).max() > 1e-3


def test_metric_average_callback_averages_epoch_logs(run):
    _, results = run
    a, b = results[0]["sync"], results[1]["sync"]
    assert a["history"]["loss"] == pytest.approx(b["history"]["loss"], abs=1e-6)
