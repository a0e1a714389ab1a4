"""The optimizer factory (one place): Keras 2's legacy (OptimizerV2) classes, which Horovod 0.28
wraps, or Keras 3's (wrapped by :mod:`horovod_patches.keras3`), per :mod:`tf_nmt.compat`."""
from __future__ import annotations

from tf_nmt.compat import KERAS3, keras
from tf_nmt.config import ConfigError, TrainConfig


def optimizer_classes():
    """The module whose Adam/SGD tf-nmt uses: Keras 2's legacy (OptimizerV2) classes, which
    Horovod 0.28 wraps, or Keras 3's."""
    return keras.optimizers if KERAS3 else keras.optimizers.legacy


def build_optimizer(cfg: TrainConfig, learning_rate) -> keras.optimizers.Optimizer:
    """Adam or SGD with ``cfg``'s settings (``clip_norm``: each variable's gradient clipped to that
    norm, after the exchange, in both Keras versions)."""
    kwargs = {"clipnorm": cfg.clip_norm} if cfg.clip_norm > 0 else {}
    optimizers = optimizer_classes()
    if cfg.optimizer == "adam":
        return optimizers.Adam(learning_rate, beta_1=cfg.beta_1, beta_2=cfg.beta_2,
                               epsilon=cfg.epsilon, **kwargs)
    if cfg.optimizer == "sgd":
        return optimizers.SGD(learning_rate, **kwargs)
    raise ConfigError(f"train.optimizer: unknown optimizer {cfg.optimizer!r}; use 'adam' or 'sgd'")


def create_slots(optimizer: keras.optimizers.Optimizer, variables) -> None:
    """Create ``optimizer``'s ``iterations`` and slots for ``variables`` now (tf_keras legacy
    optimizers create them at the first step; Keras 3 builds them), so that state can be
    restored, copied or broadcast before training."""
    if KERAS3:
        if not optimizer.built:
            optimizer.build(variables)
        return
    optimizer._create_all_weights(variables)  # noqa: SLF001 - no public API
