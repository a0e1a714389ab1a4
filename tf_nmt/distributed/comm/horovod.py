"""The Horovod side of the ``dense`` and ``sparse_as_dense`` modes: Horovod's optimizer, tape and
Keras callbacks, behind one ``sparse_as_dense`` flag.

Internal to :mod:`tf_nmt.distributed.comm`: ``model.fit`` code goes through
:func:`tf_nmt.distributed.comm.wrap_optimizer` / :func:`~tf_nmt.distributed.comm.comm_callbacks`,
which pick ``sparse_as_dense`` from the mode name. The tape is for custom loops and the tests.
All three are identities (or empty) for a single process, so callers never branch on the world
size. Horovod is imported only when a wrapper is really built.
"""
from __future__ import annotations

from typing import Any, List, Union

from tf_nmt.distributed.context import DistContext

CompressionArg = Union[None, str, Any]


def _compression(compression: CompressionArg) -> Any:
    """Horovod compressor from None/"none"/"fp16" or a ``horovod.tensorflow.Compression`` object."""
    from horovod.tensorflow.compression import Compression  # noqa: PLC0415 - optional dependency

    if compression is None or compression == "none":
        return Compression.none
    if compression == "fp16":
        return Compression.fp16
    if isinstance(compression, str):
        raise ValueError(f"unknown gradient compression {compression!r}: use 'none' or 'fp16'")
    return compression


def horovod_optimizer(opt: Any, ctx: DistContext, sparse_as_dense: bool,
                      backward_passes_per_step: int = 1, compression: CompressionArg = None) -> Any:
    """Horovod's ``DistributedOptimizer`` around a tf_keras optimizer, or
    :class:`horovod_patches.keras3.DistributedOptimizer` around a Keras 3 one (``opt`` itself when
    single-process and ``backward_passes_per_step == 1``).

    ``sparse_as_dense`` densifies embedding gradients (IndexedSlices) so they are averaged with
    one allreduce instead of an allgather. ``backward_passes_per_step > 1`` accumulates that many
    local batches per update (the aggregated gradient is averaged, not summed).
    """
    if backward_passes_per_step < 1:
        raise ValueError(f"backward_passes_per_step must be >= 1, got {backward_passes_per_step}")
    if not ctx.distributed and backward_passes_per_step == 1:
        return opt
    if ctx.hvd is None:
        raise ValueError("backward_passes_per_step > 1 needs Horovod's gradient aggregation: "
                         "initialise with tf_nmt.distributed.init(enabled=True)")
    from tf_nmt.compat import KERAS3  # noqa: PLC0415

    if KERAS3:
        from horovod_patches.keras3 import DistributedOptimizer  # noqa: PLC0415

        # count_passes: ``iterations`` counts batches, as Horovod's Keras 2 wrapper does, so
        # train.train_steps, the resume's data skip and checkpoint steps mean the same in both
        return DistributedOptimizer(opt, sparse_as_dense=sparse_as_dense,
                                    backward_passes_per_step=backward_passes_per_step,
                                    compression=_compression(compression), count_passes=True)
    from horovod_patches.keras import distributed_optimizer  # noqa: PLC0415 - optional dependency

    return distributed_optimizer(opt, sparse_as_dense=sparse_as_dense,
                                 backward_passes_per_step=backward_passes_per_step,
                                 average_aggregated_gradients=True,
                                 compression=_compression(compression))


def horovod_tape(tape: Any, ctx: DistContext, sparse_as_dense: bool,
                 compression: CompressionArg = None) -> Any:
    """``hvd.DistributedGradientTape`` around ``tape`` (``tape`` itself when single-process).

    Custom loops must also broadcast the initial variables once (see
    :func:`tf_nmt.distributed.broadcast_variables`), after the first step has built the
    optimizer's slots.
    """
    if not ctx.distributed:
        return tape
    return ctx.hvd.DistributedGradientTape(tape, sparse_as_dense=sparse_as_dense,
                                           compression=_compression(compression))


def horovod_callbacks(ctx: DistContext, broadcast: bool = True, average_metrics: bool = True,
                      root_rank: int = 0) -> List[Any]:
    """Horovod's Keras callbacks: broadcast rank ``root_rank``'s variables, optimizer state
    included, after the first batch (``broadcast``), and average epoch metrics over ranks
    (``average_metrics``). Empty for a single process; put them first in the callback list.
    """
    if not ctx.distributed:
        return []
    from tf_nmt.compat import KERAS3  # noqa: PLC0415

    if KERAS3:
        from horovod_patches import keras3  # noqa: PLC0415

        return ([keras3.BroadcastInitialState(root_rank)] if broadcast else []) + \
            ([keras3.MetricAverage()] if average_metrics else [])
    from horovod_patches.keras import import_horovod_keras  # noqa: PLC0415 - optional dependency

    hvd_keras = import_horovod_keras()
    callbacks: List[Any] = []
    if broadcast:
        callbacks.append(hvd_keras.callbacks.BroadcastGlobalVariablesCallback(root_rank))
    if average_metrics:
        callbacks.append(hvd_keras.callbacks.MetricAverageCallback())
    return callbacks
