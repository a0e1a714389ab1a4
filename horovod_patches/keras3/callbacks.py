"""Keras 3 callbacks for Horovod data-parallel training (``horovod.tensorflow`` collectives).

* :class:`BroadcastInitialState` — rank 0's model weights and optimizer variables to every rank
  when training begins (after Keras has built the optimizer);
* :class:`MetricAverage` — every numeric epoch log averaged over the ranks;
* :class:`LearningRateWarmup` — linear warm-up to the scaled learning rate (Goyal et al., 2017).

Callbacks run eagerly, between Keras's compiled train steps; each collective has a fixed name,
so every rank must use the same callbacks in the same order.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import keras
import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd


def broadcast_state(model: keras.Model, root_rank: int = 0) -> int:
    """Overwrite ``model.weights`` and its optimizer's variables (built here if needed) with
    ``root_rank``'s values; return how many variables were broadcast."""
    optimizer = getattr(model, "optimizer", None)
    variables: List[Any] = list(model.weights)
    if optimizer is not None:
        if not optimizer.built:
            optimizer.build(model.trainable_variables)
        variables += list(optimizer.variables)
    for index, var in enumerate(variables):
        value = hvd.broadcast(tf.convert_to_tensor(var), root_rank,
                              name=f"keras3.broadcast.{index}")
        var.assign(value)
    return len(variables)


class BroadcastInitialState(keras.callbacks.Callback):
    """At ``on_train_begin``: every rank takes ``root_rank``'s weights and optimizer state, so
    ranks that initialised (or restored) differently start identical. Keras 3's ``fit`` builds
    the model and the optimizer before ``on_train_begin``; an unbuilt optimizer is built here.
    Only the first ``fit`` broadcasts (a second ``fit`` continues from identical states)."""

    def __init__(self, root_rank: int = 0) -> None:
        super().__init__()
        self.root_rank = root_rank
        self.done = False

    def on_train_begin(self, logs: Optional[Dict[str, Any]] = None) -> None:
        if not self.done:
            broadcast_state(self.model, self.root_rank)
            self.done = True


class MetricAverage(keras.callbacks.Callback):
    """At ``on_epoch_end``: every numeric value of the epoch logs (``loss``, metrics,
    ``val_*``) is replaced by its mean over the ranks, in place, so callbacks after this one
    (``History``, ``ModelCheckpoint``, ``EarlyStopping``...) see the averages. Put it first in
    the ``callbacks`` list. (The progress bar prints rank-local values.)"""

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        if not logs:
            return
        for key in sorted(logs):
            value = logs[key]
            if isinstance(value, (bool, str)) or np.ndim(value) != 0:
                continue
            try:
                number = float(value)
            except (TypeError, ValueError):
                continue
            mean = hvd.allreduce(tf.constant(number, tf.float64), op=hvd.Average,
                                 name=f"keras3.metric.{key}")
            logs[key] = float(mean)


class LearningRateWarmup(keras.callbacks.Callback):
    """Linear learning-rate warm-up (Goyal et al., 2017, "Accurate, Large Minibatch SGD").

    With N ranks the global batch is N times larger, and the rate scales with it
    (``target_lr`` = single-worker rate x N); starting at that rate diverges early, so the rate
    rises linearly from ``initial_lr`` (default ``target_lr / hvd.size()``) to ``target_lr``
    over the first ``warmup_steps`` optimizer updates (or ``warmup_epochs`` x steps per epoch)
    and stays at ``target_lr`` afterwards (chain a decay of your own after that).

    The step is the optimizer's ``iterations`` (updates: with ``backward_passes_per_step = k`` it
    advances every ``k`` batches). The update at step ``s`` uses
    ``initial_lr + (target_lr - initial_lr) * min(1, s / warmup_steps)``. The optimizer's
    learning rate must be a number (a variable), not a ``LearningRateSchedule``.
    """

    def __init__(self, target_lr: float, warmup_steps: Optional[int] = None,
                 warmup_epochs: Optional[float] = None, steps_per_epoch: Optional[int] = None,
                 initial_lr: Optional[float] = None, verbose: int = 0) -> None:
        super().__init__()
        if (warmup_steps is None) == (warmup_epochs is None):
            raise ValueError("give warmup_steps or warmup_epochs (one of them)")
        self.target_lr = float(target_lr)
        self.initial_lr = None if initial_lr is None else float(initial_lr)
        self.warmup_steps = warmup_steps
        self.warmup_epochs = warmup_epochs
        self.steps_per_epoch = steps_per_epoch
        self.verbose = verbose
        self._finished = False

    def _total_steps(self) -> int:
        if self.warmup_steps is not None:
            return max(1, int(self.warmup_steps))
        per_epoch = self.steps_per_epoch or (self.params or {}).get("steps")
        if not per_epoch:
            raise ValueError("warmup_epochs needs steps_per_epoch (fit could not tell it)")
        passes = getattr(self.model.optimizer, "backward_passes_per_step", 1)
        return max(1, int(round(self.warmup_epochs * per_epoch / passes)))

    def lr_at(self, step: int) -> float:
        start = self.initial_lr if self.initial_lr is not None else self.target_lr / hvd.size()
        return start + (self.target_lr - start) * min(1.0, step / self._total_steps())

    def on_train_begin(self, logs: Optional[Dict[str, Any]] = None) -> None:
        if not isinstance(self.model.optimizer.learning_rate, keras.Variable):
            raise ValueError("LearningRateWarmup sets the learning rate: give the optimizer a "
                             "number, not a LearningRateSchedule")
        self._finished = False
        self._total_steps()  # refuse early when the length cannot be known

    def on_train_batch_begin(self, batch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        if self._finished:
            return
        step = int(self.model.optimizer.iterations)
        lr = self.lr_at(step)
        self.model.optimizer.learning_rate = lr
        if step >= self._total_steps():
            self._finished = True
            if self.verbose and hvd.rank() == 0:
                print(f"LearningRateWarmup: reached {lr:.6g} at step {step}")
