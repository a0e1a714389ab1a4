"""Every helper is an identity/no-op for a single process."""
import pytest

from tf_nmt import distributed
from tf_nmt.compat import keras, tf


def test_optimizer_and_tape_unchanged():
    ctx = distributed.SINGLE
    opt = keras.optimizers.SGD(0.1)
    assert distributed.wrap_optimizer(opt, ctx, sparse_as_dense=False) is opt
    with tf.GradientTape() as tape:
        pass
    assert distributed.distributed_tape(tape, ctx) is tape


def test_accumulation_without_horovod_is_a_clear_error():
    with pytest.raises(ValueError, match="backward_passes_per_step"):
        distributed.wrap_optimizer(keras.optimizers.SGD(0.1), distributed.SINGLE,
                                   backward_passes_per_step=2)
    with pytest.raises(ValueError, match=">= 1"):
        distributed.wrap_optimizer(keras.optimizers.SGD(0.1), distributed.SINGLE,
                                   backward_passes_per_step=0)


def test_callbacks_and_collectives_are_no_ops():
    ctx = distributed.SINGLE
    assert distributed.distributed_callbacks(ctx) == []
    v = tf.Variable([1.0, 2.0])
    distributed.broadcast_variables([v], ctx)
    assert v.numpy().tolist() == [1.0, 2.0]
    assert distributed.allreduce_mean(3.5, ctx) == 3.5
    assert distributed.allreduce_sum(2, ctx) == 2.0
    distributed.barrier(ctx)


def test_shard_dataset_is_identity():
    ds = tf.data.Dataset.range(5)
    assert distributed.shard_dataset(ds, distributed.SINGLE) is ds


def test_chief_helpers():
    calls = []

    @distributed.only_chief
    def write(x):
        calls.append(x)
        return x

    assert write(3) == 3 and calls == [3]
    assert distributed.chief_only_callbacks(["cb"], distributed.SINGLE) == ["cb"]
    worker = distributed.DistContext(rank=1, size=2)
    assert distributed.chief_only_callbacks(["cb"], worker) == []
