"""Scaling rule, shard checks and the world-size check."""
import pytest

from tf_nmt import distributed
from tf_nmt.compat import tf
from tf_nmt.distributed import DistContext


@pytest.mark.parametrize("size, lr", [(1, 0.5), (2, 1.0), (8, 4.0)])
def test_scale_lr_is_linear(size, lr):
    assert distributed.scale_lr(0.5, size) == pytest.approx(lr)


@pytest.mark.parametrize("warmup, size, expected", [(4000, 1, 4000), (4000, 2, 2000),
                                                     (4000, 3, 1334), (1, 8, 1), (0, 4, 1)])
def test_scale_warmup_ceil_at_least_one(warmup, size, expected):
    assert distributed.scale_warmup(warmup, size) == expected


def test_explicit_values_win():
    assert distributed.scale_lr(0.5, 8, override=0.1) == 0.1
    assert distributed.scale_warmup(4000, 8, override=123) == 123


def test_bad_size():
    with pytest.raises(ValueError):
        distributed.scale_lr(0.1, 0)
    with pytest.raises(ValueError):
        distributed.scale_warmup(10, 0)


def test_check_shards():
    distributed.check_shards(4, DistContext(rank=0, size=4))
    distributed.check_shards(1, distributed.SINGLE)
    with pytest.raises(ValueError, match="cannot split 3 data shards over 4 workers"):
        distributed.check_shards(3, DistContext(rank=0, size=4))
    with pytest.raises(ValueError, match="examples"):
        distributed.check_shards(0, distributed.SINGLE, what="examples")


def test_shard_dataset_disjoint_and_complete():
    ds = tf.data.Dataset.range(10)
    parts = [list(distributed.shard_dataset(ds, DistContext(rank=r, size=3)).as_numpy_iterator())
             for r in range(3)]
    assert sorted(sum(parts, [])) == list(range(10))
    assert parts[1] == [1, 4, 7]


def test_check_world_size():
    two = DistContext(rank=0, size=2)
    assert distributed.check_world_size(2, two)
    assert distributed.check_world_size(None, two)
    with pytest.raises(distributed.WorldSizeMismatch, match="written by 4 worker"):
        distributed.check_world_size(4, two)
    assert distributed.check_world_size(4, two, allow_change=True) is False
    assert isinstance(distributed.WorldSizeMismatch("x"), ValueError)
