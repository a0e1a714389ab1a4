"""ModelAverage and the BMUF block update in one process (the mean over one rank is the rank)."""
import numpy as np
import pytest

from tf_nmt.compat import tf
from tf_nmt.distributed import SINGLE
from tf_nmt.distributed.comm.averaging import BlockUpdate, ModelAverage, make_sync


def test_model_average_of_one_rank_is_identity_and_counts_bytes():
    v = [tf.Variable([1.0, 2.0]), tf.Variable([[3.0]])]
    avg = ModelAverage(v, SINGLE)
    avg.sync()
    np.testing.assert_array_equal(v[0].numpy(), [1.0, 2.0])
    assert avg.payload_bytes == 12


@pytest.mark.parametrize("momentum, lr, nesterov", [(0.5, 1.0, True), (0.9, 0.7, False),
                                                    (0.0, 1.0, True)])
def test_block_update_matches_numpy(momentum, lr, nesterov):
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=5).astype(np.float32)
    var = tf.Variable(w0)
    bmuf = BlockUpdate([var], SINGLE, momentum, lr, nesterov)
    w, delta = w0.astype(np.float64), np.zeros(5)
    for _ in range(3):
        local = var.numpy() + rng.normal(size=5).astype(np.float32)  # a block of local steps
        var.assign(local)
        bmuf.sync()
        start = w + momentum * delta if nesterov else w  # where the ranks began this block
        delta = momentum * delta + lr * (local - start)  # mean over one rank = local
        w = w + delta
        expect = w + momentum * delta if nesterov else w
        np.testing.assert_allclose(var.numpy(), expect, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(bmuf.state.global_params[0].numpy(), w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("nesterov", [True, False])
def test_block_momentum_filters_steady_progress_to_its_one_over_one_minus_m_gain(nesterov):
    """Chen & Huo's block momentum m turns a steady progress p per block into steps of
    η p / (1 − m): bounded. (Measuring the progress from W instead of the block's Nesterov start
    filtered with 2m: for m = 0.5 every block's progress was summed for ever.)"""
    var = tf.Variable([0.0, 0.0])
    bmuf = BlockUpdate([var], SINGLE, 0.5, 1.0, nesterov)
    p = np.array([1.0, -0.5])
    for _ in range(40):
        var.assign(var.numpy() + p)  # every block makes the same local progress
        bmuf.sync()
    np.testing.assert_allclose(bmuf.state.delta[0].numpy(), p / (1 - 0.5), rtol=1e-4)


def test_block_update_without_momentum_and_unit_lr_is_averaging():
    var = tf.Variable([1.0, -2.0])
    bmuf = make_sync("bmuf", [var], SINGLE, block_momentum=0.0, block_lr=1.0)
    var.assign([4.0, 5.0])
    bmuf.sync()
    np.testing.assert_array_equal(var.numpy(), [4.0, 5.0])


def test_unknown_sync_kind():
    with pytest.raises(ValueError, match="unknown parameter sync"):
        make_sync("gossip", [tf.Variable(1.0)], SINGLE)


def test_block_update_state_is_checkpointed_and_reset_restarts_the_block(tmp_path):
    """W and Δ are the variables of ``state`` (restored exactly from a checkpoint); ``reset``
    makes W the current parameters and Δ zero."""
    var = tf.Variable([1.0, 2.0])
    bmuf = BlockUpdate([var], SINGLE, 0.5, 1.0)
    var.assign([3.0, 5.0])
    bmuf.sync()
    saved = [t.numpy() for t in bmuf.state.global_params + bmuf.state.delta]
    prefix = tf.train.Checkpoint(comm=bmuf.state).save(str(tmp_path / "ckpt"))
    other = BlockUpdate([tf.Variable([0.0, 0.0])], SINGLE, 0.5, 1.0)
    tf.train.Checkpoint(comm=other.state).restore(prefix).assert_consumed()
    for got, want in zip(other.state.global_params + other.state.delta, saved):
        np.testing.assert_array_equal(got.numpy(), want)
    assert np.abs(saved[1]).max() > 0  # Δ moved
    bmuf.reset()
    np.testing.assert_array_equal(bmuf.state.global_params[0].numpy(), var.numpy())
    np.testing.assert_array_equal(bmuf.state.delta[0].numpy(), [0.0, 0.0])
