"""The optimizer factory (one place), with Horovod-friendly Keras 2 optimizers."""
from __future__ import annotations

from tf_nmt.compat import keras
from tf_nmt.config import ConfigError, TrainConfig


def build_optimizer(cfg: TrainConfig, learning_rate) -> keras.optimizers.Optimizer:
    """Adam/SGD from the legacy (OptimizerV2) Keras 2 classes, which Horovod 0.28 wraps."""
    kwargs = {"clipnorm": cfg.clip_norm} if cfg.clip_norm > 0 else {}
    if cfg.optimizer == "adam":
        return keras.optimizers.legacy.Adam(learning_rate, beta_1=cfg.beta_1, beta_2=cfg.beta_2,
                                            epsilon=cfg.epsilon, **kwargs)
    if cfg.optimizer == "sgd":
        return keras.optimizers.legacy.SGD(learning_rate, **kwargs)
    raise ConfigError(f"train.optimizer: unknown optimizer {cfg.optimizer!r}; use 'adam' or 'sgd'")
