"""A resume with per-rank state (graddrop, fedavg, bmuf) restores every rank from its own
``checkpoints/rank-<r>``; a rank without its checkpoint is refused, naming the rank and the file,
never handed rank 0's state (issue 45 B). Two ranks are simulated in one process: the fake
Horovod answers each collective from what the ranks' directories hold."""
from pathlib import Path

import pytest

from tf_nmt.compat import tf
from tf_nmt.distributed.context import DistContext
from tf_nmt.errors import UserError
from tf_nmt.training.checkpoints import (make_checkpoint, make_manager, make_rank_manager,
                                         rank_directory, restore_training_state, step_of)

SIZE = 2


class FakeHorovod:
    Min, Sum = "min", "sum"

    def __init__(self, checkpoints: Path):
        self.checkpoints = checkpoints

    def _latest(self, rank):
        return step_of(tf.train.latest_checkpoint(str(rank_directory(self.checkpoints, rank))))

    def allreduce(self, tensor, op, name):
        step = min(self._latest(r) for r in range(SIZE))
        if name == "resume_step":
            return tf.constant(step, tf.int64)
        assert name == "resume_missing" and op == self.Sum
        held = [(rank_directory(self.checkpoints, r) / f"ckpt-{step}.index").is_file()
                if step >= 0 else self._latest(r) >= 0 for r in range(SIZE)]
        return tf.constant([0 if h else 1 for h in held], tf.int64)

    def broadcast(self, tensor, root_rank, name):
        return tensor


def _save(checkpoints: Path, rank: int, steps, value: float):
    var = tf.Variable(value)
    manager = make_rank_manager(make_checkpoint(tf.Module(), v=var), checkpoints, rank, keep=2)
    for step in steps:
        manager.save(checkpoint_number=step)
    return var


def _restore(checkpoints: Path, rank: int, world_size_changed=False):
    var = tf.Variable(-1.0)
    checkpoint = make_checkpoint(tf.Module(), v=var)
    ctx = DistContext(rank=rank, size=SIZE, hvd=FakeHorovod(checkpoints))
    lines = []
    prefix = restore_training_state(checkpoint, make_manager(checkpoint, checkpoints, 2),
                                    make_rank_manager(checkpoint, checkpoints, rank, 2), ctx,
                                    log=lines.append, world_size_changed=world_size_changed)
    return float(var.numpy()), prefix, lines


@pytest.fixture()
def checkpoints(tmp_path):
    path = tmp_path / "checkpoints"
    _save(path, 0, [5], 0.0)  # also the chief's checkpoint
    make_manager(make_checkpoint(tf.Module(), v=tf.Variable(0.0)), path, 2).save(checkpoint_number=5)
    return path


def test_each_rank_restores_its_own(checkpoints):
    _save(checkpoints, 1, [5], 1.0)
    assert _restore(checkpoints, 0)[:2] == (0.0, str(rank_directory(checkpoints, 0) / "ckpt-5"))
    assert _restore(checkpoints, 1)[:2] == (1.0, str(rank_directory(checkpoints, 1) / "ckpt-5"))


def test_missing_rank_checkpoint_is_refused_not_replaced_by_rank_0s(checkpoints):
    for rank in (0, 1):  # every rank refuses, naming rank 1
        with pytest.raises(UserError, match=r"rank\(s\) 1 have no checkpoint .*rank-1/ \(no checkpoint\)"):
            _restore(checkpoints, rank)


def test_step_mismatch_is_refused_naming_the_file(checkpoints):
    _save(checkpoints, 1, [1, 2, 3], 1.0)  # rank 1 keeps steps 2 and 3, rank 0 only 5
    with pytest.raises(UserError, match=r"rank\(s\) 0 .*step 3 \(.*rank-0/ckpt-3\.index\)"):
        _restore(checkpoints, 1)


def test_world_size_change_takes_rank_0s_state_and_says_so(checkpoints):
    value, prefix, lines = _restore(checkpoints, 1, world_size_changed=True)
    assert value == 0.0 and prefix.endswith(f"{checkpoints.name}/ckpt-5")
    assert len(lines) == 1 and "rank 0's state" in lines[0]
