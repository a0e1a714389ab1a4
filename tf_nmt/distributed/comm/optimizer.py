"""An optimizer whose update first exchanges the gradients, on either Keras version.

The exchange itself (:class:`~tf_nmt.distributed.comm.graddrop.GradDropExchange`: what is sent,
the residuals, the local gradients, the byte accounting) is one object, built by a factory on
the first update and shared by both versions; only the hook into the optimizer differs:

* Keras 2 (tf_keras legacy optimizers): ``model.fit`` calls ``optimizer.minimize`` →
  ``apply_gradients``; the residuals are optimizer slots (``_create_slots``);
* Keras 3: ``train_step`` calls ``apply_gradients`` → ``apply``; the residuals are optimizer
  variables made in ``build`` (``add_variable_from_reference``).

The subclass made by :func:`exchange_optimizer` replaces the local gradients by the exchanged
ones there, before the optimizer's own clipping and update, keeps the residuals with the
optimizer state (so they are checkpointed with it, per rank) and otherwise behaves exactly like
the optimizer it was made from.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence

from tf_nmt.compat import KERAS3, keras, tf

RESIDUAL_SLOT = "gd_residual"
ExchangeFactory = Callable[[Sequence[tf.Variable]], Any]


class _ExchangeMixin:
    """What both Keras versions share: build the exchange once, run it at the current step."""

    _comm_factory: ExchangeFactory
    _comm_residuals: bool
    _comm_exchange: Any = None

    def _exchanged(self, pairs: Sequence[Any], residuals: Optional[Sequence[Any]]) -> List[Any]:
        """The gradients of ``pairs`` (gradient, variable) after the exchange at this step."""
        if self._comm_exchange is None:
            self._comm_exchange = self._comm_factory([v for _, v in pairs])
        step = tf.convert_to_tensor(self.iterations)  # the step before this update
        return self._comm_exchange.exchange([g for g, _ in pairs], residuals, step)


class _Keras2Exchange(_ExchangeMixin):
    """The hook into a tf_keras legacy optimizer: ``apply_gradients``, residuals as slots."""

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
        residuals = ([self.get_slot(v, RESIDUAL_SLOT) for v in variables]
                     if self._comm_residuals else None)
        grads = self._exchanged(pairs, residuals)
        return super().apply_gradients(zip(grads, variables), name=name,
                                       experimental_aggregate_gradients=experimental_aggregate_gradients)


class _Residuals:
    """The residual variables in the order the optimizer was built with, in a holder that
    TensorFlow's tracking leaves alone (they are saved once, as the optimizer's variables)."""

    def __init__(self, variables: Sequence[Any]) -> None:
        self.variables = list(variables)


class _Keras3Exchange(_ExchangeMixin):
    """The hook into a Keras 3 optimizer: ``apply``, residuals as optimizer variables."""

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._comm_residual_vars = _Residuals(
            [self.add_variable_from_reference(v, name=RESIDUAL_SLOT) for v in var_list]
            if self._comm_residuals else [])

    def residual_variables(self) -> List[Any]:
        """The residuals (one per trainable variable, in build order); [] without them. (Not
        tf_keras's ``get_slot``: TensorFlow's checkpointing would then save them as slots.)"""
        return list(self._comm_residual_vars.variables) if self.built else []

    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
        if not grads:
            return
        if trainable_variables is None:
            if not self.built:
                raise ValueError("build the optimizer or pass the variables with the gradients")
            variables = list(self._trainable_variables)
        else:
            variables = list(trainable_variables)
        if not self.built:
            self.build(variables)  # its variables' paths start with the optimizer's name
        pairs = [(g, v) for g, v in zip(grads, variables) if g is not None]
        residuals = None
        if self._comm_residuals:
            held = self._comm_residual_vars.variables
            residuals = [held[self._get_variable_index(v)] for _, v in pairs]
        grads = self._exchanged(pairs, residuals)
        return super().apply(grads, [v for _, v in pairs])


def exchange_optimizer(optimizer: Any, factory: ExchangeFactory, residuals: bool) -> Any:
    """A copy of ``optimizer`` (same class, config and learning-rate object) that exchanges
    gradients with ``factory(variables)`` before applying them; ``residuals`` adds a per-variable
    residual passed to the exchange (a slot on Keras 2, an optimizer variable on Keras 3)."""
    if KERAS3:
        if not isinstance(optimizer, keras.optimizers.Optimizer):
            raise TypeError("gradient exchange on Keras 3 needs a keras.optimizers.Optimizer, got "
                            f"{type(optimizer).__module__}.{type(optimizer).__name__}")
        if optimizer.built:
            raise ValueError("wrap the optimizer before it is used (it is already built)")
        if getattr(optimizer, "gradient_accumulation_steps", None):
            raise ValueError("gradient exchange runs every step: the optimizer's "
                             "gradient_accumulation_steps would accumulate after it")
        mixin, learning_rate = _Keras3Exchange, optimizer._learning_rate  # noqa: SLF001
        if isinstance(learning_rate, keras.Variable):  # a fixed rate: its value is in the config
            learning_rate = None
    else:
        if not isinstance(optimizer, keras.optimizers.legacy.Optimizer):
            raise TypeError("gradient exchange needs a tf_keras legacy optimizer (as the trainer "
                            f"builds), got {type(optimizer).__module__}.{type(optimizer).__name__}")
        mixin, learning_rate = _Keras2Exchange, optimizer._hyper["learning_rate"]  # noqa: SLF001
    cls = type(f"Exchange{type(optimizer).__name__}", (mixin, type(optimizer)), {})
    config = optimizer.get_config()
    if learning_rate is not None:
        config["learning_rate"] = learning_rate  # the schedule object, not its config
    wrapped = cls.from_config(config)
    wrapped._comm_factory, wrapped._comm_residuals = factory, residuals
    return wrapped


def exchange_of(optimizer: Any) -> Optional[Any]:
    """The exchange an optimizer made by :func:`exchange_optimizer` has built, also inside a
    loss-scale optimizer (``inner_optimizer``, either version); None otherwise."""
    while optimizer is not None:
        if isinstance(optimizer, _ExchangeMixin):
            return optimizer._comm_exchange  # noqa: SLF001
        optimizer = getattr(optimizer, "inner_optimizer", None)
    return None


def residual_variables(optimizer: Any, variables: Sequence[Any]) -> List[Any]:
    """The GradDrop residuals of ``variables`` held by an optimizer made by
    :func:`exchange_optimizer` (each rank's own state), in either Keras version; [] for any
    other optimizer."""
    if isinstance(optimizer, _Keras3Exchange):
        held = optimizer.residual_variables()
        return [held[optimizer._get_variable_index(v)] for v in variables] if held else []  # noqa: SLF001
    if hasattr(optimizer, "get_slot_names") and RESIDUAL_SLOT in optimizer.get_slot_names():
        return [optimizer.get_slot(v, RESIDUAL_SLOT) for v in variables]
    return []
