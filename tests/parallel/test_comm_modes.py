"""Communication modes under a real ``horovodrun -np 2`` (Gloo): graddrop, fedavg, BMUF.

One launch runs every phase of workers/comm_modes.py (~1.5 min on 2 cores).
"""
import numpy as np
import pytest

from tests.parallel import launch

pytestmark = [pytest.mark.parallel, pytest.mark.slow]

if not launch.horovod_importable():
    pytest.skip("horovod.tensorflow is not importable: build it with scripts/install_horovod.sh",
                allow_module_level=True)

TOL = 1e-6


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return launch.horovodrun("comm_modes.py", tmp_path_factory.mktemp("comm"), controller="gloo",
                             env=launch.KERAS2)


def arr(x):
    return np.asarray(x, dtype=np.float64)


@pytest.mark.parametrize("mode", ["graddrop", "graddrop_local", "graddrop_per_tensor",
                                  "horovod_sparse"])
def test_graddrop_at_zero_drop_ratio_equals_dense_allreduce(results, mode):
    """R = 0: same parameters as Horovod's dense allreduce training, on both ranks."""
    dense = arr(results[0]["r0"]["dense"])
    assert np.abs(dense - arr(results[0]["r0"]["initial"])).max() > 1e-2, "dense did not train"
    for rank in (0, 1):
        np.testing.assert_array_equal(arr(results[rank]["r0"]["dense"]), dense)
        np.testing.assert_allclose(arr(results[rank]["r0"][mode]), dense, rtol=0, atol=TOL,
                                   err_msg=f"rank {rank}")


def test_error_feedback_never_loses_gradient_mass(results):
    """After 5 steps at R = 0.9: N x (sum of applied averaged updates) + all residuals equals the
    sum of every rank's gradients; every rank applied the same updates. Without error feedback
    the dropped mass is gone."""
    local = arr(results[0]["mass"]["feedback"]["local_sum"]) + arr(results[1]["mass"]["feedback"]["local_sum"])
    fb = [results[r]["mass"]["feedback"] for r in (0, 1)]
    np.testing.assert_array_equal(arr(fb[0]["applied_sum"]), arr(fb[1]["applied_sum"]))
    held = arr(fb[0]["residual"]) + arr(fb[1]["residual"])
    assert np.abs(held).max() > 0.1, "nothing was dropped"
    np.testing.assert_allclose(2 * arr(fb[0]["applied_sum"]) + held, local, rtol=0, atol=1e-5)
    nofb = results[0]["mass"]["no_feedback"]
    lost = local - 2 * arr(nofb["applied_sum"])
    assert np.abs(lost).sum() > 0.05 * np.abs(local).sum()


@pytest.mark.parametrize("mode", ["fedavg", "graddrop_local"])
def test_parameters_identical_across_ranks_right_after_a_periodic_average(results, mode):
    before = [arr(results[r]["average"][mode]["before"]) for r in (0, 1)]
    after = [arr(results[r]["average"][mode]["after"]) for r in (0, 1)]
    for step in (1, 3):  # steps 2 and 4 (P = 2): averaged
        np.testing.assert_array_equal(after[0][step], after[1][step])
        np.testing.assert_allclose(after[0][step], (before[0][step] + before[1][step]) / 2,
                                   rtol=0, atol=TOL)
    for step in (0, 2):  # steps 1 and 3: local steps, ranks differ
        assert np.abs(after[0][step] - after[1][step]).max() > 1e-4


def test_bmuf_without_block_momentum_and_unit_block_lr_equals_model_averaging(results):
    for rank in (0, 1):
        fedavg = arr(results[rank]["bmuf"]["fedavg"])
        np.testing.assert_allclose(arr(results[rank]["bmuf"]["bmuf_m0_lr1"]), fedavg, rtol=0, atol=TOL)
        assert np.abs(arr(results[rank]["bmuf"]["bmuf_m0.5"]) - fedavg).max() > 1e-3
    np.testing.assert_array_equal(arr(results[0]["bmuf"]["bmuf_m0.5"]),
                                  arr(results[1]["bmuf"]["bmuf_m0.5"]))


def test_graddrop_at_099_moves_at_least_50x_fewer_gradient_bytes(results):
    """Measured from the tensors each rank hands to the allgathers (uint16 positions + int32
    block counts + float32 values), against the dense allreduce of the same gradients."""
    for rank in (0, 1):
        stats = results[rank]["bytes"]["float"]
        assert stats["world_size"] == 2 and stats["steps"] == 3
        assert stats["dense_bytes_per_step"] / stats["sent_bytes_per_step"] >= 50
        # the summed sparse gradient is denser than what one rank kept (it grows with N)
        assert stats["mean_density"] > 1.5 * stats["mean_kept_fraction"]
        one_bit = results[rank]["bytes"]["one_bit"]
        assert one_bit["sent_bytes_per_step"] < 0.6 * stats["sent_bytes_per_step"]


def test_dense_fallback_in_the_drop_warm_up_applies_what_the_allgather_would(results):
    """A linear warm-up to R = 0.99 over 4 steps on 2 ranks: at R = 0.2475 (under the 2-rank
    threshold of about 1/3) both ranks allreduce densely, later they allgather; every step's
    update equals the allgather-only exchange's, on both ranks, and so do the residuals."""
    for rank in (0, 1):
        on, off = results[rank]["fallback"]["on"], results[rank]["fallback"]["off"]
        assert [s["dense_fallback"] for s in on] == [True, False, False, False]
        assert not any(s["dense_fallback"] for s in off)
        assert on[0]["sent_bytes"] == on[0]["dense_bytes"] < off[0]["sent_bytes"]
        for a, b in zip(on, off):
            np.testing.assert_allclose(arr(a["update"]), arr(b["update"]), rtol=0, atol=TOL)
            np.testing.assert_allclose(arr(a["residual"]), arr(b["residual"]), rtol=0, atol=TOL)
            assert a["kept"] == b["kept"]
        np.testing.assert_array_equal(arr(on[0]["update"]), arr(results[1 - rank]["fallback"]["on"][0]["update"]))
    assert np.abs(arr(results[0]["fallback"]["on"][0]["update"])).max() > 0.05
