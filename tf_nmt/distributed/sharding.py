"""Refusing data splits that leave a rank without data (its missing collectives would hang)."""
from __future__ import annotations

from tf_nmt.distributed.context import DistContext


def check_shards(num_shards_or_examples: int, ctx: DistContext, what: str = "data shards") -> None:
    """Raise ValueError when there are fewer ``what`` than ranks (some rank would get nothing,
    and its missing collectives would hang the others)."""
    if num_shards_or_examples < ctx.size:
        raise ValueError(
            f"cannot split {num_shards_or_examples} {what} over {ctx.size} workers: every rank "
            f"needs at least one; use at most {max(1, num_shards_or_examples)} workers or more data")

