"""Which gradient communication a run uses, validated once from the ``train.*`` config keys."""
from __future__ import annotations

from dataclasses import dataclass

from tf_nmt.config import ConfigError, TrainConfig
from tf_nmt.modes import (AVERAGING_KEYS, BMUF_KEYS, COMM_MODES, GRADDROP_KEYS, HOROVOD_MODES,
                          MODE_KEYS, averages_parameters, averaging_modes_text, keys_used)

__all__ = ["AVERAGING_KEYS", "BMUF_KEYS", "COMM_MODES", "GRADDROP_KEYS", "HOROVOD_MODES",
           "MODE_KEYS", "CommSettings", "check_unused_keys", "keys_used", "resolve_comm"]
WARMUP_SHAPES = ("linear", "geometric")  # how the drop ratio ramps up (see ramped_drop_ratio)


_WHERE = ((GRADDROP_KEYS, "train.comm=graddrop"), (BMUF_KEYS, "train.comm=bmuf"),
          (AVERAGING_KEYS, f"train.comm={averaging_modes_text()}"))


def _mode_name(t: TrainConfig) -> str:
    if t.comm == "graddrop" and not t.local_gradients:
        return "train.comm=graddrop without train.local_gradients"
    return f"train.comm={t.comm}"


def check_unused_keys(t: TrainConfig) -> None:
    """ConfigError for a mode-specific key set to a non-default value that ``t.comm`` ignores."""
    used = keys_used(t.comm, t.local_gradients)
    defaults = TrainConfig()
    for key in MODE_KEYS:
        value = getattr(t, key)
        if key in used or value == getattr(defaults, key):
            continue
        where = next(modes for keys, modes in _WHERE if key in keys)
        raise ConfigError(f"train.{key}={value!r} is ignored by {_mode_name(t)}: it applies to "
                          f"{where} only; remove it or choose that mode")


@dataclass(frozen=True)
class CommSettings:
    """The resolved communication mode and its parameters (see TrainConfig for the keys)."""

    mode: str = "sparse_as_dense"
    drop_ratio: float = 0.99
    per_tensor: bool = False
    drop_warmup_steps: int = 1000
    drop_warmup_shape: str = "linear"
    error_feedback: bool = True
    local_gradients: bool = False
    one_bit: bool = False
    average_every: int = 500
    block_momentum: float = 0.5
    block_lr: float = 1.0
    nesterov: bool = True

    def rank_checkpoints(self, world_size: int) -> bool:
        """True when a rank's training state can differ from the chief's model checkpoint, so
        every rank must checkpoint its own for an exact resume: several ranks with state of
        their own (GradDrop residuals, local models and optimizer moments, BMUF's W and Δ),
        or a final parameter sync that changes the model (BMUF, one process too)."""
        return self.mode not in HOROVOD_MODES and (world_size > 1 or self.averages_parameters)

    @property
    def averages_parameters(self) -> bool:
        """Ranks drift apart between periodic parameter averages."""
        return averages_parameters(self.mode, self.local_gradients)


def resolve_comm(t: TrainConfig) -> CommSettings:
    """:class:`CommSettings` from ``train.*``; raises ConfigError on a bad value."""
    if t.comm not in COMM_MODES:
        raise ConfigError(f"train.comm: unknown mode {t.comm!r} (valid: {', '.join(COMM_MODES)})")
    if not 0.0 <= t.drop_ratio < 1.0:
        raise ConfigError(f"train.drop_ratio must be in [0, 1), got {t.drop_ratio}")
    if t.drop_threshold not in ("global", "per_tensor"):
        raise ConfigError(f"train.drop_threshold must be 'global' or 'per_tensor', "
                          f"got {t.drop_threshold!r}")
    if t.drop_warmup_steps < 0:
        raise ConfigError(f"train.drop_warmup_steps must be >= 0, got {t.drop_warmup_steps}")
    if t.drop_warmup_shape not in WARMUP_SHAPES:
        raise ConfigError(f"train.drop_warmup_shape must be one of {WARMUP_SHAPES}, "
                          f"got {t.drop_warmup_shape!r}")
    if t.average_every < 1:
        raise ConfigError(f"train.average_every must be >= 1, got {t.average_every}")
    if not 0.0 <= t.bmuf_block_momentum < 1.0:
        raise ConfigError(f"train.bmuf_block_momentum must be in [0, 1), got {t.bmuf_block_momentum}")
    if t.bmuf_block_lr <= 0.0:
        raise ConfigError(f"train.bmuf_block_lr must be > 0, got {t.bmuf_block_lr}")
    check_unused_keys(t)
    if t.comm not in HOROVOD_MODES and t.backward_passes_per_step != 1:
        raise ConfigError(f"train.comm={t.comm} does not support train.backward_passes_per_step > 1")
    return CommSettings(mode=t.comm, drop_ratio=t.drop_ratio, per_tensor=t.drop_threshold == "per_tensor",
                        drop_warmup_steps=t.drop_warmup_steps,
                        drop_warmup_shape=t.drop_warmup_shape, error_feedback=t.error_feedback,
                        local_gradients=t.local_gradients, one_bit=t.one_bit,
                        average_every=t.average_every, block_momentum=t.bmuf_block_momentum,
                        block_lr=t.bmuf_block_lr, nesterov=t.bmuf_nesterov)
