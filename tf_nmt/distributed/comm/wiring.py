"""Wiring a communication mode into ``model.fit``: the optimizer and the callbacks it needs."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, List, Optional

from tf_nmt.distributed.comm.callbacks import BroadcastModel, CommStats, PeriodicSync
from tf_nmt.distributed.comm.graddrop import GradDropExchange, horovod_gather, local_gather
from tf_nmt.distributed.comm.optimizer import exchange_of, exchange_optimizer
from tf_nmt.distributed.comm.settings import HOROVOD_MODES, CommSettings
from tf_nmt.distributed.context import DistContext


def wrap_optimizer(optimizer: Any, settings: CommSettings, ctx: DistContext,
                   backward_passes_per_step: int = 1) -> Any:
    """The optimizer for ``settings.mode``: Horovod's DistributedOptimizer (dense modes), a
    GradDrop-exchanging copy (graddrop) or ``optimizer`` itself (fedavg/bmuf: local steps)."""
    if settings.mode in HOROVOD_MODES:
        from tf_nmt.distributed.optimizer import wrap_optimizer as horovod_wrap  # noqa: PLC0415

        return horovod_wrap(optimizer, ctx, sparse_as_dense=settings.sparse_as_dense,
                            backward_passes_per_step=backward_passes_per_step)
    if settings.mode == "graddrop":
        size = ctx.size if ctx.distributed else 1
        gather = horovod_gather(ctx.hvd) if ctx.distributed else local_gather

        def factory(variables):
            return GradDropExchange(settings, [v.shape for v in variables], size, gather,
                                    seed=ctx.rank)

        return exchange_optimizer(optimizer, factory, residuals=settings.error_feedback)
    return optimizer


def comm_callbacks(settings: CommSettings, ctx: DistContext, log_every: int = 50,
                   log: Callable[[str], None] = print, stats_path: Optional[Path] = None,
                   average_metrics: bool = True) -> List[Any]:
    """Callbacks every rank runs, to be put first: start in sync, (periodic sync), statistics."""
    callbacks: List[Any] = []
    if settings.mode in HOROVOD_MODES:
        from tf_nmt.distributed.callbacks import distributed_callbacks  # noqa: PLC0415

        callbacks += distributed_callbacks(ctx, average_metrics=average_metrics)
    elif ctx.distributed:
        callbacks.append(BroadcastModel(ctx))
        if average_metrics:
            from horovod_patches.keras import import_horovod_keras  # noqa: PLC0415

            callbacks.append(import_horovod_keras().callbacks.MetricAverageCallback())
    sync = None
    if settings.mode == "bmuf":
        sync = PeriodicSync(ctx, settings.average_every, "bmuf",
                            block_momentum=settings.block_momentum, block_lr=settings.block_lr,
                            nesterov=settings.nesterov)
    elif settings.averages_parameters:
        sync = PeriodicSync(ctx, settings.average_every, "average")
    if sync is not None:
        callbacks.append(sync)
    callbacks.append(CommStats(settings.mode, exchange_of, sync, log_every, log=log,
                               out_path=stats_path, world_size=ctx.size))
    return callbacks
