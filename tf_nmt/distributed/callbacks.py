"""Keras callbacks every worker needs in a multi-process ``model.fit``."""
from __future__ import annotations

from typing import Any, List

from tf_nmt.distributed.context import DistContext


def distributed_callbacks(ctx: DistContext, root_rank: int = 0,
                          average_metrics: bool = True) -> List[Any]:
    """[broadcast rank ``root_rank``'s variables after the first batch, average epoch metrics].

    Put them first in the callback list so later callbacks (checkpointing, TensorBoard, early
    stopping) see synchronised weights and averaged metrics. Empty for a single process.
    """
    if not ctx.distributed:
        return []
    from horovod_patches.keras import import_horovod_keras  # noqa: PLC0415

    hvd_keras = import_horovod_keras()
    callbacks: List[Any] = [hvd_keras.callbacks.BroadcastGlobalVariablesCallback(root_rank)]
    if average_metrics:
        callbacks.append(hvd_keras.callbacks.MetricAverageCallback())
    return callbacks
