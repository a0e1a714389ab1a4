"""The project's Horovod layer: one API for single-process and ``horovodrun`` runs.

Without Horovod (or with one process) every helper degrades to a no-op and Horovod is never
imported. Typical use in a trainer::

    ctx = distributed.init()                                   # auto-detects horovodrun
    lr = distributed.scale_lr(base_lr, ctx.size)
    opt = distributed.wrap_optimizer(opt, ctx, sparse_as_dense=True)
    callbacks = distributed.distributed_callbacks(ctx) + distributed.chief_only_callbacks(ckpt, ctx)
"""
from tf_nmt.distributed.callbacks import distributed_callbacks
from tf_nmt.distributed.context import (SINGLE, DistContext, current, horovod_available, init,
                                        launch_info)
from tf_nmt.distributed.optimizer import distributed_tape, wrap_optimizer
from tf_nmt.distributed.rank0 import chief_only_callbacks, only_chief
from tf_nmt.distributed.scaling import scale_lr, scale_warmup
from tf_nmt.distributed.sharding import check_shards, shard_dataset
from tf_nmt.distributed.sync import allreduce_mean, allreduce_sum, barrier, broadcast_variables
from tf_nmt.distributed.world_size import WorldSizeMismatch, check_world_size

__all__ = [
    "DistContext", "SINGLE", "init", "current", "horovod_available", "launch_info",
    "wrap_optimizer", "distributed_tape", "distributed_callbacks",
    "scale_lr", "scale_warmup", "shard_dataset", "check_shards",
    "check_world_size", "WorldSizeMismatch", "only_chief", "chief_only_callbacks",
    "broadcast_variables", "allreduce_mean", "allreduce_sum", "barrier",
]
