"""Guarding resumes whose world size differs from the one that wrote the checkpoint."""
from __future__ import annotations

from typing import Optional

from tf_nmt.distributed.context import DistContext


class WorldSizeMismatch(ValueError):
    """A checkpoint written by N workers is being resumed by M != N workers."""


def check_world_size(saved_size: Optional[int], ctx: DistContext, allow_change: bool = False) -> bool:
    """Return True when ``saved_size`` matches ``ctx.size`` (or nothing was saved).

    A different world size changes the effective batch and the scaled learning rate/warm-up, so
    it raises :class:`WorldSizeMismatch` unless ``allow_change`` (then it returns False).
    """
    if saved_size is None or int(saved_size) == ctx.size:
        return True
    if allow_change:
        return False
    raise WorldSizeMismatch(
        f"checkpoint was written by {saved_size} worker(s) but this run has {ctx.size}: the "
        "effective batch size and the scaled learning rate/warm-up would change; allow the "
        "change explicitly (--allow-world-size-change) to resume anyway")
