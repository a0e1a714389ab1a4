"""Doing things on the chief (rank 0) only: checkpoints, logs, files."""
from __future__ import annotations

import functools
from typing import Any, Callable, Iterable, List, Optional, TypeVar

from tf_nmt.distributed.context import DistContext, current

F = TypeVar("F", bound=Callable[..., Any])


def only_chief(fn: F) -> F:
    """Decorator: run ``fn`` on rank 0 only; other ranks get None. The rank is read at call time."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs) if current().is_chief else None

    return wrapper  # type: ignore[return-value]


def chief_only_callbacks(callbacks: Iterable[Any], ctx: Optional[DistContext] = None) -> List[Any]:
    """``callbacks`` as a list on rank 0, an empty list elsewhere."""
    ctx = ctx or current()
    return list(callbacks) if ctx.is_chief else []
