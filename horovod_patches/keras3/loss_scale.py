"""Dynamic loss scaling (``mixed_float16``) that keeps Horovod ranks in step on Keras 3.

Keras 3's ``LossScaleOptimizer.apply`` first asks ``check_finite(grads)`` about **this rank's**
gradients, then runs the wrapped optimizer (and so the :class:`DistributedOptimizer`'s allreduce)
only when they are finite. A rank whose gradients overflow alone would skip the collective the
other ranks are waiting in: the job deadlocks (or pairs one rank's step k with another's step
k + 1), and the ranks' loss scales drift apart.

:class:`LossScaleOptimizer` is Keras 3's, with one change: its ``check_finite`` is a global AND,
one scalar allreduce of the number of ranks that saw a non-finite gradient. Every rank takes the
same branch, so the wrapped optimizer's collectives run on all ranks or on none, the loss scales
stay equal, and a step one rank overflowed is skipped everywhere (the average would hold that
rank's inf/NaN anyway).
"""
from __future__ import annotations

from typing import Any, Optional

import keras
import tensorflow as tf

import horovod.tensorflow as hvd


@keras.saving.register_keras_serializable(package="horovod_patches")
class LossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """Keras 3's dynamic ``LossScaleOptimizer`` whose overflow check agrees on every rank.

    Use it around the :class:`DistributedOptimizer` (or any optimizer whose ``apply`` runs
    Horovod collectives)::

        keras.mixed_precision.set_global_policy("mixed_float16")
        opt = LossScaleOptimizer(DistributedOptimizer(keras.optimizers.Adam(lr)))
        model.compile(optimizer=opt, loss=..., jit_compile=False)

    Args:
        inner_optimizer: the optimizer to wrap (not yet used).
        initial_scale, dynamic_growth_steps: as Keras 3's (the scale halves on a skipped step
            and doubles after ``dynamic_growth_steps`` finite ones, identically on every rank).
        count_skipped_steps: advance ``iterations`` on a skipped step too (tf_keras's
            behaviour; code that counts batches by ``iterations``, such as a resumed run's data
            skip, then stays exact). Keras 3's default is ``False``: only applied steps count.
        name: optional name.

    With one rank (``hvd.size() == 1``) no collective is issued. Horovod must be initialised
    before the first step.
    """

    def __init__(self, inner_optimizer: keras.optimizers.Optimizer,
                 initial_scale: float = 2.0 ** 15, dynamic_growth_steps: int = 2000,
                 count_skipped_steps: bool = False, name: Optional[str] = None,
                 **kwargs: Any) -> None:
        if not isinstance(inner_optimizer, keras.optimizers.Optimizer):
            raise TypeError(
                "LossScaleOptimizer wraps a Keras 3 optimizer (keras.optimizers.Optimizer), got "
                f"{type(inner_optimizer).__module__}.{type(inner_optimizer).__name__}")
        if isinstance(inner_optimizer, keras.optimizers.LossScaleOptimizer):
            raise ValueError("the optimizer is already a LossScaleOptimizer: wrap the inner one")
        super().__init__(inner_optimizer, initial_scale=initial_scale,
                         dynamic_growth_steps=dynamic_growth_steps, name=name, **kwargs)
        self.count_skipped_steps = bool(count_skipped_steps)

    def check_finite(self, grads: Any) -> Any:
        """True on every rank when every rank's gradients are finite, else False everywhere."""
        local = super().check_finite(grads)
        if hvd.size() == 1:
            return local
        overflowed = tf.cast(tf.logical_not(local), tf.int32)
        return tf.equal(hvd.allreduce(overflowed, op=hvd.Sum,
                                      name="keras3.loss_scale.nonfinite_ranks"), 0)

    def _stateful_handle_non_finite_grads(self) -> None:
        super()._stateful_handle_non_finite_grads()
        if self.count_skipped_steps:
            self.iterations.assign_add(1)

    def stateless_apply(self, optimizer_variables: Any, grads: Any, trainable_variables: Any):
        raise NotImplementedError("horovod_patches.keras3 runs on the TensorFlow backend only")

    def get_config(self) -> dict:
        return {**super().get_config(), "count_skipped_steps": self.count_skipped_steps}
