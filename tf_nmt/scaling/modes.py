"""Gradient-communication modes a scaling study can sweep, as config overrides.

Data-driven: when the config has ``train.comm`` (:mod:`tf_nmt.distributed.comm`) a mode is
``--set train.comm=<mode>`` plus the extras below; without it only the two Horovod modes exist
(``train.sparse_as_dense``). The step benchmark times what happens inside one optimizer step, so
modes that communicate in callbacks every P steps (fedavg, bmuf) are refused there.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, List

from tf_nmt.config import TrainConfig

# Extra overrides per mode: benchmark graddrop at its steady-state ratio, not its warm-up.
MODE_EXTRAS: Dict[str, List[str]] = {"graddrop": ["train.drop_warmup_steps=0"]}
PER_STEP_MODES = ("dense", "sparse_as_dense", "graddrop")
LEGACY_MODES: Dict[str, List[str]] = {"dense": ["train.sparse_as_dense=false"],
                                      "sparse_as_dense": ["train.sparse_as_dense=true"]}


def has_comm_key() -> bool:
    """Whether this checkout's TrainConfig has ``train.comm``."""
    return "comm" in {f.name for f in dataclasses.fields(TrainConfig)}


def available_modes() -> List[str]:
    """Modes the step benchmark can time with this checkout."""
    if has_comm_key():
        from tf_nmt.distributed.comm import COMM_MODES  # noqa: PLC0415

        return [m for m in COMM_MODES if m in PER_STEP_MODES]
    return list(LEGACY_MODES)


def mode_overrides(mode: str) -> List[str]:
    """``section.key=value`` overrides selecting ``mode``; ValueError for an unavailable mode."""
    modes = available_modes()
    if mode not in modes:
        raise ValueError(f"comm mode {mode!r} is not available for the step benchmark "
                         f"(available here: {', '.join(modes)})")
    if has_comm_key():
        return [f"train.comm={mode}"] + MODE_EXTRAS.get(mode, [])
    return list(LEGACY_MODES[mode])
