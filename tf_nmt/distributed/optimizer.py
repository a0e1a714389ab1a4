"""Averaging gradients over workers: Keras optimizers (model.fit) and GradientTapes (custom loops).

Both are identity wrappers for a single process, so callers never branch on the world size.
"""
from __future__ import annotations

from typing import Any, Optional, Union

from tf_nmt.distributed.context import DistContext

CompressionArg = Union[None, str, Any]


def _compression(compression: CompressionArg) -> Any:
    """Horovod compressor from None/"none"/"fp16" or a ``horovod.tensorflow.Compression`` object."""
    from horovod.tensorflow.compression import Compression  # noqa: PLC0415

    if compression is None or compression == "none":
        return Compression.none
    if compression == "fp16":
        return Compression.fp16
    if isinstance(compression, str):
        raise ValueError(f"unknown gradient compression {compression!r}: use 'none' or 'fp16'")
    return compression


def wrap_optimizer(opt: Any, ctx: DistContext, sparse_as_dense: bool = True,
                   backward_passes_per_step: int = 1, compression: CompressionArg = None) -> Any:
    """Horovod ``DistributedOptimizer`` around a tf_keras optimizer (``opt`` itself when
    single-process and ``backward_passes_per_step == 1``).

    ``sparse_as_dense`` densifies embedding gradients (IndexedSlices) so they are averaged with
    one allreduce instead of an allgather; for NMT vocabularies that is usually faster.
    ``backward_passes_per_step > 1`` accumulates that many local batches per update (the
    aggregated gradient is averaged, not summed).
    """
    if backward_passes_per_step < 1:
        raise ValueError(f"backward_passes_per_step must be >= 1, got {backward_passes_per_step}")
    if not ctx.distributed and backward_passes_per_step == 1:
        return opt
    if ctx.hvd is None:
        raise ValueError("backward_passes_per_step > 1 needs Horovod's gradient aggregation: "
                         "initialise with tf_nmt.distributed.init(enabled=True)")
    from horovod_patches.keras import distributed_optimizer  # noqa: PLC0415

    return distributed_optimizer(opt, sparse_as_dense=sparse_as_dense,
                                 backward_passes_per_step=backward_passes_per_step,
                                 average_aggregated_gradients=True,
                                 compression=_compression(compression))


def distributed_tape(tape: Any, ctx: DistContext, sparse_as_dense: bool = True,
                     compression: CompressionArg = None) -> Any:
    """``hvd.DistributedGradientTape`` around ``tape`` (``tape`` itself when single-process).

    Custom loops must also broadcast the initial variables once (see
    :func:`tf_nmt.distributed.sync.broadcast_variables`), after the first step has built the
    optimizer's slots.
    """
    if not ctx.distributed:
        return tape
    return ctx.hvd.DistributedGradientTape(tape, sparse_as_dense=sparse_as_dense,
                                           compression=_compression(compression))
