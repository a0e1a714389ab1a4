"""The one entry point of gradient communication for ``model.fit``: the optimizer a mode needs
(:func:`wrap_optimizer`) and the callbacks it needs (:func:`comm_callbacks`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from tf_nmt.compat import variable_name
from tf_nmt.distributed.comm.averaging import BlockUpdate
from tf_nmt.distributed.comm.callbacks import BroadcastModel, CommStats, PeriodicSync
from tf_nmt.distributed.comm.graddrop import (GradDropExchange, horovod_gather, horovod_sum,
                                              local_gather, local_sum)
from tf_nmt.distributed.comm.horovod import horovod_callbacks, horovod_optimizer
from tf_nmt.distributed.comm.optimizer import exchange_of, exchange_optimizer
from tf_nmt.distributed.comm.settings import HOROVOD_MODES, CommSettings
from tf_nmt.distributed.context import DistContext


def wrap_optimizer(optimizer: Any, settings: CommSettings, ctx: DistContext,
                   backward_passes_per_step: int = 1) -> Any:
    """The optimizer ``settings.mode`` trains with.

    * ``dense`` / ``sparse_as_dense``: Horovod's DistributedOptimizer, with IndexedSlices
      gradients allgathered (``dense``) or densified and allreduced (``sparse_as_dense``);
      ``optimizer`` itself for a single process without gradient accumulation;
    * ``graddrop``: a copy of ``optimizer`` that exchanges GradDrop-sparsified gradients (either
      Keras version: the same exchange, hooked into the optimizer each version has);
    * ``fedavg`` / ``bmuf``: ``optimizer`` itself (local steps; :func:`comm_callbacks` syncs).
    """
    if settings.mode in HOROVOD_MODES:
        return horovod_optimizer(optimizer, ctx, sparse_as_dense=settings.mode == "sparse_as_dense",
                                 backward_passes_per_step=backward_passes_per_step)
    if settings.mode == "graddrop":
        size = ctx.size if ctx.distributed else 1
        gather = horovod_gather(ctx.hvd) if ctx.distributed else local_gather
        reduce = horovod_sum(ctx.hvd) if ctx.distributed else local_sum

        def factory(variables):
            return GradDropExchange(settings, [v.shape for v in variables], size, gather,
                                    seed=ctx.rank, reduce=reduce,
                                    names=[variable_name(v) for v in variables])

        return exchange_optimizer(optimizer, factory, residuals=settings.error_feedback)
    return optimizer


def comm_callbacks(settings: CommSettings, ctx: DistContext, log_every: int = 50,
                   log: Callable[[str], None] = print, stats_path: Optional[Path] = None,
                   average_metrics: bool = True) -> List[Any]:
    """Callbacks every rank runs for ``settings.mode``, to be put first in the list: start in
    sync, the periodic parameter sync (fedavg, bmuf, graddrop with local gradients) and the
    per-step byte statistics (:class:`CommStats`, written to ``stats_path`` when given)."""
    if settings.mode in HOROVOD_MODES:  # Horovod broadcasts optimizer state too
        callbacks = horovod_callbacks(ctx, average_metrics=average_metrics)
    else:  # each rank keeps its own optimizer state (GradDrop residuals are per rank)
        callbacks = [BroadcastModel(ctx)] if ctx.distributed else []
        callbacks += horovod_callbacks(ctx, broadcast=False, average_metrics=average_metrics)
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


def checkpoint_state(callbacks: Sequence[Any], model: Any) -> Dict[str, Any]:
    """The mode's own state to checkpoint beside the model and optimizer (GradDrop residuals
    are optimizer slots already): ``{"comm": BMUF's W and Δ}`` for bmuf, else ``{}``. Builds
    the periodic sync over ``model``'s trainable variables now, so a restore can fill it."""
    for callback in callbacks:
        if isinstance(callback, PeriodicSync):
            sync = callback.build(model.trainable_variables)
            if isinstance(sync, BlockUpdate):
                return {"comm": sync.state}
    return {}
