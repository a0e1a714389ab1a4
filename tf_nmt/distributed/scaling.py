"""Scaling the learning rate and warm-up with the number of workers.

With ``size`` workers each step averages gradients over a ``size`` times larger batch, so we
follow the linear scaling rule (Goyal et al., 2017): ``lr = base_lr * size``. The warm-up is
counted in optimizer steps; each step now sees ``size`` times more data, so the same number of
examples is warmed up over ``ceil(warmup_steps / size)`` steps (at least 1). Explicit values
(``override``) always win over the rule.
"""
from __future__ import annotations

import math
from typing import Optional


def scale_lr(base_lr: float, size: int, override: Optional[float] = None) -> float:
    """``base_lr * size`` (linear scaling rule), or ``override`` when given."""
    if override is not None:
        return float(override)
    if size < 1:
        raise ValueError(f"world size must be >= 1, got {size}")
    return float(base_lr) * size


def scale_warmup(warmup_steps: int, size: int, override: Optional[int] = None) -> int:
    """``max(1, ceil(warmup_steps / size))``, or ``override`` when given."""
    if override is not None:
        return int(override)
    if size < 1:
        raise ValueError(f"world size must be >= 1, got {size}")
    return max(1, math.ceil(warmup_steps / size))
