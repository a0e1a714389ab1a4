"""A tf_keras (legacy) optimizer whose ``apply_gradients`` first exchanges the gradients.

``model.fit`` calls ``optimizer.minimize`` → ``apply_gradients``; the subclass made by
:func:`exchange_optimizer` replaces the local gradients by the exchanged ones there, keeps the
GradDrop residuals as optimizer slots (so they are checkpointed with the optimizer state) and
otherwise behaves exactly like the optimizer it was made from.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from tf_nmt.compat import keras, tf

RESIDUAL_SLOT = "gd_residual"
ExchangeFactory = Callable[[Sequence[tf.Variable]], Any]


class _ExchangeMixin:
    _comm_factory: ExchangeFactory
    _comm_residuals: bool
    _comm_exchange: Any = None

    def _create_slots(self, var_list):
        super()._create_slots(var_list)
        if self._comm_residuals:
            for var in var_list:
                self.add_slot(var, RESIDUAL_SLOT)

    def apply_gradients(self, grads_and_vars, name=None, experimental_aggregate_gradients=True):
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        variables = [v for _, v in pairs]
        with tf.name_scope(self._name):
            with tf.init_scope():
                self._create_all_weights(variables)
        if self._comm_exchange is None:
            self._comm_exchange = self._comm_factory(variables)
        residuals = ([self.get_slot(v, RESIDUAL_SLOT) for v in variables]
                     if self._comm_residuals else None)
        grads = self._comm_exchange.exchange([g for g, _ in pairs], residuals, self.iterations)
        return super().apply_gradients(zip(grads, variables), name=name,
                                       experimental_aggregate_gradients=experimental_aggregate_gradients)


def exchange_optimizer(optimizer: keras.optimizers.legacy.Optimizer, factory: ExchangeFactory,
                       residuals: bool) -> keras.optimizers.legacy.Optimizer:
    """A copy of ``optimizer`` (same class, config and learning-rate object) that exchanges
    gradients with ``factory(variables)`` before applying them; ``residuals`` adds a per-variable
    residual slot passed to the exchange."""
    if not isinstance(optimizer, keras.optimizers.legacy.Optimizer):
        raise TypeError("gradient exchange needs a tf_keras legacy optimizer (as the trainer builds), "
                        f"got {type(optimizer).__module__}.{type(optimizer).__name__}")
    cls = type(f"Exchange{type(optimizer).__name__}", (_ExchangeMixin, type(optimizer)), {})
    config = optimizer.get_config()
    config["learning_rate"] = optimizer._hyper["learning_rate"]  # schedule object, not its config
    wrapped = cls.from_config(config)
    wrapped._comm_factory, wrapped._comm_residuals = factory, residuals
    return wrapped


def exchange_of(optimizer: Any) -> Optional[Any]:
    """The exchange an optimizer made by :func:`exchange_optimizer` has built (None otherwise)."""
    return getattr(optimizer, "_comm_exchange", None)
