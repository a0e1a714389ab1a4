"""Shard checks (the world-size check of a resume is tested with the run directory)."""
import pytest

from tf_nmt import distributed
from tf_nmt.distributed import DistContext


def test_check_shards():
    distributed.check_shards(4, DistContext(rank=0, size=4))
    distributed.check_shards(1, distributed.SINGLE)
    with pytest.raises(ValueError, match="cannot split 3 data shards over 4 workers"):
        distributed.check_shards(3, DistContext(rank=0, size=4))
    with pytest.raises(ValueError, match="examples"):
        distributed.check_shards(0, distributed.SINGLE, what="examples")
