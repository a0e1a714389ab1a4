"""The registry of gradient-communication modes and learning-rate schedules: for each, the
``train.*`` keys it reads and what it supports. The one home of these facts: the config's
choices (:mod:`tf_nmt.config`), the refusal table (:mod:`tf_nmt.config_usage`), the comm
settings and wiring (:mod:`tf_nmt.distributed.comm`), the trainer's checks, elastic training
and the schedules read them here instead of restating them. Imports nothing of tf-nmt, so every
layer can read it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

#: ``train.*`` keys of GradDrop (its ratio, threshold, warm-up, residuals, local gradients, 1-bit).
GRADDROP_KEYS: Tuple[str, ...] = ("drop_ratio", "drop_threshold", "drop_warmup_steps",
                                  "drop_warmup_shape", "error_feedback", "local_gradients",
                                  "one_bit")
#: ``train.*`` keys of BMUF's block update.
BMUF_KEYS: Tuple[str, ...] = ("bmuf_block_momentum", "bmuf_block_lr", "bmuf_nesterov")
#: The period of a mode's parameter average.
AVERAGING_KEYS: Tuple[str, ...] = ("average_every",)
#: Every mode-specific key.
MODE_KEYS: Tuple[str, ...] = GRADDROP_KEYS + BMUF_KEYS + AVERAGING_KEYS


@dataclass(frozen=True)
class CommMode:
    """One ``train.comm`` mode.

    ``horovod``: Horovod's DistributedOptimizer averages every step's gradients, so all ranks
    hold the same weights and optimizer state after each step; that is what a weight EMA, XLA
    compilation, several steps per execution and accumulated backward passes need (the other
    modes act between steps, with custom ops). ``keys``: the mode-specific keys it reads;
    ``averages``: periodic parameter averages every ``train.average_every`` steps ("always",
    "never", or "with local_gradients"); ``elastic``: ``tf-nmt train --elastic`` runs it;
    ``keras3``: it runs on Keras 3 (``TF_NMT_KERAS=3``)."""

    name: str
    horovod: bool
    keys: Tuple[str, ...] = ()
    averages: str = "never"
    elastic: bool = False
    keras3: bool = True

    @property
    def supports_ema(self) -> bool:
        return self.horovod

    @property
    def supports_jit(self) -> bool:
        return self.horovod

    @property
    def acts_within_steps(self) -> bool:
        """Whether several steps per execution and accumulated backward passes keep it exact."""
        return self.horovod

    def averages_parameters(self, local_gradients: bool = False) -> bool:
        return self.averages == "always" or (self.averages == "with local_gradients"
                                             and local_gradients)

    def keys_used(self, local_gradients: bool = False) -> Tuple[str, ...]:
        """The mode-specific keys this mode reads (``average_every`` only where it averages)."""
        return self.keys + (AVERAGING_KEYS if self.averages_parameters(local_gradients) else ())


COMM: Dict[str, CommMode] = {m.name: m for m in (
    CommMode("dense", horovod=True, elastic=True),
    CommMode("sparse_as_dense", horovod=True, elastic=True),
    CommMode("graddrop", horovod=False, keys=GRADDROP_KEYS, averages="with local_gradients",
             elastic=True),
    CommMode("fedavg", horovod=False, averages="always"),
    CommMode("bmuf", horovod=False, keys=BMUF_KEYS, averages="always"),
)}
COMM_MODES: Tuple[str, ...] = tuple(COMM)
HOROVOD_MODES: Tuple[str, ...] = tuple(m for m in COMM_MODES if COMM[m].horovod)
ELASTIC_MODES: Tuple[str, ...] = tuple(m for m in COMM_MODES if COMM[m].elastic)
AVERAGING_MODES: Tuple[str, ...] = tuple(m for m in COMM_MODES if COMM[m].averages != "never")


def keys_used(mode: str, local_gradients: bool = False) -> Tuple[str, ...]:
    """The mode-specific ``train.*`` keys ``train.comm=mode`` reads."""
    return COMM[mode].keys_used(local_gradients)


def averages_parameters(mode: str, local_gradients: bool = False) -> bool:
    """Ranks drift apart between periodic parameter averages under ``mode``."""
    return COMM[mode].averages_parameters(local_gradients)


def averaging_modes_text() -> str:
    """The modes that average parameters, in words (for error messages)."""
    always = [m for m in COMM_MODES if COMM[m].averages == "always"]
    local = [m for m in COMM_MODES if COMM[m].averages == "with local_gradients"]
    return ", ".join(always) + "".join(f", or {m} with train.local_gradients=true" for m in local)


#: The ``train.*`` keys each learning-rate schedule's constructor takes
#: (:mod:`tf_nmt.training.schedules`; tests/test_config_usage.py checks them against it).
SCHEDULE_KEYS: Dict[str, Tuple[str, ...]] = {
    "warmup_inverse_sqrt": ("peak_lr", "warmup_steps"),
    "inverse_sqrt": ("peak_lr", "warmup_steps"),
    "linear_warmup": ("peak_lr", "warmup_steps"),
    "step_decay": ("peak_lr", "decay_start", "decay_every", "decay_factor"),
    "constant": ("peak_lr",),
}
#: What a schedule becomes for a transfer child with ``train.init_warmup=false`` (its warm-up
#: ramp dropped); schedules not listed have no ramp to drop.
WITHOUT_WARMUP: Dict[str, str] = {"warmup_inverse_sqrt": "inverse_sqrt",
                                  "linear_warmup": "constant"}
