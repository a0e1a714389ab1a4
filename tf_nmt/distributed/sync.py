"""Small collectives for custom loops and evaluation; no-ops for a single process."""
from __future__ import annotations

from typing import Any, Iterable

from tf_nmt.distributed.context import DistContext


def broadcast_variables(variables: Iterable[Any], ctx: DistContext, root_rank: int = 0) -> None:
    """Overwrite ``variables`` on every rank with rank ``root_rank``'s values."""
    if ctx.distributed:
        ctx.hvd.broadcast_variables([_tf_variable(v) for v in variables], root_rank=root_rank)


def _tf_variable(variable: Any) -> Any:
    """The ``tf.Variable`` behind ``variable``: a Keras 3 variable is not one but holds one
    (``.value``); Horovod's broadcast passes its variables to a ``tf.function``, which would
    receive a Keras 3 variable as a read-only tensor."""
    from tf_nmt.compat import tf  # noqa: PLC0415

    return variable if isinstance(variable, tf.Variable) else variable.value


def chief_value(value: int, ctx: DistContext, name: str) -> int:
    """Rank 0's ``value`` on every rank: decisions the ranks must share (e.g. which checkpoint
    to resume from, which a rank reading a shared directory could see differently)."""
    if not ctx.distributed:
        return int(value)
    from tf_nmt.compat import tf  # noqa: PLC0415

    return int(ctx.hvd.broadcast(tf.constant(int(value), tf.int64), root_rank=0,
                                 name=name).numpy())


def allreduce_mean(value: Any, ctx: DistContext, name: str = "allreduce_mean") -> float:
    """Mean of a scalar over all ranks (the value itself for a single process)."""
    if not ctx.distributed:
        return float(value)
    from tf_nmt.compat import tf  # noqa: PLC0415

    return float(ctx.hvd.allreduce(tf.constant(float(value), tf.float64), op=ctx.hvd.Average,
                                   name=name).numpy())


def allreduce_sum(value: Any, ctx: DistContext, name: str = "allreduce_sum") -> float:
    """Sum of a scalar over all ranks (e.g. token counts for a corpus-level metric)."""
    if not ctx.distributed:
        return float(value)
    from tf_nmt.compat import tf  # noqa: PLC0415

    return float(ctx.hvd.allreduce(tf.constant(float(value), tf.float64), op=ctx.hvd.Sum,
                                   name=name).numpy())


def barrier(ctx: DistContext) -> None:
    """Wait until every rank gets here (e.g. rank 0 finished writing a file).

    A tiny allreduce: Horovod 0.28.1's TensorFlow API has no ``barrier``.
    """
    allreduce_sum(0.0, ctx, name="barrier")
