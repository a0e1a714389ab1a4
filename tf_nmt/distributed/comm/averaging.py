"""Periodic parameter synchronisation across ranks: plain averaging and BMUF block updates.

Used by ``fedavg`` (local steps, average every P), by graddrop with local gradients (ranks drift
apart, so they are averaged every P steps) and, with a block update on top, by ``bmuf``.
"""
from __future__ import annotations

from typing import List, Sequence

from tf_nmt.compat import tf
from tf_nmt.distributed.accounting import variables_bytes
from tf_nmt.distributed.context import DistContext


def _mean_over_ranks(ctx: DistContext, tensors: Sequence[tf.Tensor]) -> List[tf.Tensor]:
    if not ctx.distributed:
        return [tf.identity(t) for t in tensors]
    return [ctx.hvd.allreduce(t, op=ctx.hvd.Average, name=f"param_average_{i}")
            for i, t in enumerate(tensors)]


class ModelAverage:
    """Replace every rank's ``variables`` with their mean over ranks (one allreduce each)."""

    def __init__(self, variables: Sequence[tf.Variable], ctx: DistContext) -> None:
        self.variables, self.ctx = list(variables), ctx
        self.payload_bytes = variables_bytes(self.variables)
        self._fn = tf.function(self._sync)

    def _sync(self) -> None:
        means = _mean_over_ranks(self.ctx, [tf.convert_to_tensor(v) for v in self.variables])
        for var, mean in zip(self.variables, means):
            var.assign(mean)

    def sync(self) -> None:
        self._fn()


class BlockUpdate(ModelAverage):
    """BMUF (Chen & Huo 2016): G = mean − S, Δ ← m Δ + η G, W ← W + Δ, and the ranks start the
    next block from S = W + m Δ with Nesterov (S = W without). With m = 0 and η = 1 it is exactly
    :class:`ModelAverage`.

    G is the block's progress from where the ranks *started* it (S, the Nesterov look-ahead
    point), not from W: measured from W it would count m Δ again, so Δ would be filtered with
    (1 + η) m instead of m, which with the usual m = 1 − 1/N and η = 1 is no decay at all for
    N = 2 (Δ then sums every block's progress and training diverges; issue 14's grid showed it).

    ``W`` (the global model at the start of the block) and ``Δ`` live in the variables of
    :attr:`state` (a ``tf.Module`` to put in the checkpoint: a resume needs both). They start as
    the current parameters and zero; :meth:`reset` sets them again once the ranks have been
    synchronised at the start of a fresh run.
    """

    def __init__(self, variables: Sequence[tf.Variable], ctx: DistContext, block_momentum: float,
                 block_lr: float, nesterov: bool = True) -> None:
        self.momentum, self.block_lr, self.nesterov = block_momentum, block_lr, nesterov
        super().__init__(variables, ctx)
        self.state = tf.Module(name="bmuf")
        self.state.global_params = [tf.Variable(tf.convert_to_tensor(v), trainable=False)
                                    for v in self.variables]
        self.state.delta = [tf.Variable(tf.zeros_like(v), trainable=False) for v in self.variables]

    def reset(self) -> None:
        """W ← the current parameters, Δ ← 0 (the start of a fresh run)."""
        for var, w, delta in zip(self.variables, self.state.global_params, self.state.delta):
            w.assign(tf.convert_to_tensor(var))
            delta.assign(tf.zeros_like(delta))

    def _sync(self) -> None:
        means = _mean_over_ranks(self.ctx, [tf.convert_to_tensor(v) for v in self.variables])
        for var, mean, w, delta in zip(self.variables, means, self.state.global_params,
                                       self.state.delta):
            start = w + self.momentum * delta if self.nesterov else w  # where this block began
            new_delta = self.momentum * delta + self.block_lr * (mean - start)
            new_w = w + new_delta
            delta.assign(new_delta)
            w.assign(new_w)
            var.assign(new_w + self.momentum * new_delta if self.nesterov else new_w)


def make_sync(kind: str, variables: Sequence[tf.Variable], ctx: DistContext,
              block_momentum: float = 0.0, block_lr: float = 1.0,
              nesterov: bool = True) -> ModelAverage:
    """``"average"`` → :class:`ModelAverage`; ``"bmuf"`` → :class:`BlockUpdate`."""
    if kind == "average":
        return ModelAverage(variables, ctx)
    if kind == "bmuf":
        return BlockUpdate(variables, ctx, block_momentum, block_lr, nesterov)
    raise ValueError(f"unknown parameter sync {kind!r}")

