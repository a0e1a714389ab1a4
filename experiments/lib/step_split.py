"""A training step split into compute and communication, by timing the same step twice.

Two models are compiled from one config: one with the run's distributed optimizer (what
``tf-nmt train`` steps: forward, backward, gradient exchange, update) and one with a
single-process context, whose optimizer exchanges nothing (compute only). Then

    comm = step - compute    (the exchange plus waiting for the slowest rank)

Used by :mod:`experiments.throughput.study` (real batches under ``horovodrun``) and
:mod:`experiments.scaling.cluster.worker` (synthetic batches on an emulated cluster).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from tf_nmt import distributed
from tf_nmt.compat import keras
from tf_nmt.config import Config
from tf_nmt.distributed.context import DistContext
from tf_nmt.training.trainer import build_and_compile


@dataclass(frozen=True)
class StepSplit:
    """Seconds per step: the whole distributed step, its compute part and the rest."""

    step_s: float
    compute_s: float

    @property
    def comm_s_raw(self) -> float:
        """``step - compute``; negative when timing noise exceeds the exchange."""
        return self.step_s - self.compute_s

    @property
    def comm_s(self) -> float:
        """Communication time per step, never below zero."""
        return max(0.0, self.comm_s_raw)

    @property
    def comm_share(self) -> Optional[float]:
        """Communication's share of the step (None for a zero step time)."""
        return self.comm_s / self.step_s if self.step_s else None


def with_and_without_exchange(cfg: Config, vocab_size: int, ctx: DistContext,
                              seed: Optional[int] = None) -> Tuple[keras.Model, keras.Model]:
    """(model stepping through ``ctx``'s gradient exchange, same model without it).

    With ``seed`` both start from the same seeded initialisation, and the exchanging model's
    variables are broadcast from rank 0 as in training.
    """
    models = []
    for run_ctx in (ctx, distributed.SINGLE):
        if seed is not None:
            keras.utils.set_random_seed(seed)
        # the second: no exchange work at all (graddrop would select and encode locally too)
        models.append(build_and_compile(cfg, vocab_size, run_ctx, exchange=run_ctx is ctx))
    if seed is not None:
        distributed.broadcast_variables(models[0].variables, ctx)
    return models[0], models[1]


def paired_difference(with_times: Sequence[float], without_times: Sequence[float],
                      block: int) -> float:
    """Median over alternating blocks of (the block's median time with the exchange - the
    median of the block without it that preceded it): paired blocks cancel the load that
    other work on the machine puts on both alike."""
    if len(with_times) != len(without_times) or not with_times:
        raise ValueError("times with and without the exchange must pair up")
    return statistics.median(
        statistics.median(with_times[i:i + block]) - statistics.median(without_times[i:i + block])
        for i in range(0, len(with_times), block))
