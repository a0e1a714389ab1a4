"""Gradient-communication modes a scaling study can sweep, as config overrides.

A mode is ``--set train.comm=<mode>`` (the names of :data:`tf_nmt.config.COMM_MODES`) plus the
extras below. The step benchmark times what happens inside one optimizer step, so modes that
communicate in callbacks every P steps (fedavg, bmuf) are refused there.
"""
from __future__ import annotations

from typing import Dict, List

from tf_nmt.config import COMM_MODES

# Extra overrides per mode: benchmark graddrop at its steady-state ratio, not its warm-up.
MODE_EXTRAS: Dict[str, List[str]] = {"graddrop": ["train.drop_warmup_steps=0"]}
PER_STEP_MODES = ("dense", "sparse_as_dense", "graddrop")


def available_modes() -> List[str]:
    """Modes the step benchmark can time (communication inside the optimizer step)."""
    return [m for m in COMM_MODES if m in PER_STEP_MODES]


def mode_overrides(mode: str) -> List[str]:
    """``section.key=value`` overrides selecting ``mode``; ValueError for an unavailable mode."""
    modes = available_modes()
    if mode not in modes:
        raise ValueError(f"comm mode {mode!r} is not available for the step benchmark "
                         f"(available: {', '.join(modes)})")
    return [f"train.comm={mode}"] + MODE_EXTRAS.get(mode, [])
