"""Every helper is an identity/no-op for a single process."""
import pytest

from tf_nmt import distributed
from tf_nmt.compat import keras, tf
from tf_nmt.distributed.comm.horovod import horovod_callbacks, horovod_optimizer, horovod_tape


def test_optimizer_and_tape_unchanged():
    ctx = distributed.SINGLE
    opt = keras.optimizers.SGD(0.1)
    assert horovod_optimizer(opt, ctx, sparse_as_dense=False) is opt
    with tf.GradientTape() as tape:
        pass
    assert horovod_tape(tape, ctx, sparse_as_dense=True) is tape


def test_accumulation_without_horovod_is_a_clear_error():
    with pytest.raises(ValueError, match="backward_passes_per_step"):
        horovod_optimizer(keras.optimizers.SGD(0.1), distributed.SINGLE, sparse_as_dense=True,
                          backward_passes_per_step=2)
    with pytest.raises(ValueError, match=">= 1"):
        horovod_optimizer(keras.optimizers.SGD(0.1), distributed.SINGLE, sparse_as_dense=True,
                          backward_passes_per_step=0)


def test_callbacks_and_collectives_are_no_ops():
    ctx = distributed.SINGLE
    assert horovod_callbacks(ctx) == []
    v = tf.Variable([1.0, 2.0])
    distributed.broadcast_variables([v], ctx)
    assert v.numpy().tolist() == [1.0, 2.0]
    assert distributed.allreduce_mean(3.5, ctx) == 3.5
    assert distributed.allreduce_sum(2, ctx) == 2.0
    distributed.barrier(ctx)


def test_public_surface_is_the_documented_one():
    assert sorted(distributed.__all__) == sorted([
        "DistContext", "SINGLE", "init", "current", "horovod_available", "launch_info",
        "broadcast_variables", "allreduce_mean", "allreduce_sum", "barrier", "check_shards"])
    for name in distributed.__all__:
        assert name in distributed.__doc__, name
