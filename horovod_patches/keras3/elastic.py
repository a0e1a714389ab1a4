"""Horovod elastic training for Keras 3: the state object and commit callback that
``horovod.tensorflow.keras.elastic`` provides only for Keras 2 (``tf_keras``).

* :class:`KerasState` — Horovod's ``ObjectState`` holding a Keras 3 model's variables and its
  optimizer's (``optimizer.variables``: ``iterations``, slots, a wrapper's own counters), plus any
  Python attributes given as keyword arguments: ``commit`` keeps a copy in memory, ``restore``
  puts it back after a failed collective, ``sync`` sends rank 0's values to every worker; with
  ``fingerprint_dir`` each rank appends a fingerprint of its synced state there after every sync
  (:mod:`horovod_patches.fingerprint`: check the ranks agree after every recovery);
* :class:`CommitStateCallback` — ``state.commit()`` every ``batches_per_commit`` batches and at
  each epoch end (a commit also checks whether the host set changed);
* :func:`run` — Horovod's own ``horovod.tensorflow.elastic.run`` (the reset/retry loop).

Why: Horovod's Keras state calls ``optimizer.variables()`` and builds on tf_keras callbacks,
neither of which exists in Keras 3.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import keras
import tensorflow as tf

import horovod.tensorflow as hvd
from horovod.common.elastic import ObjectState
from horovod.tensorflow.elastic import run
from horovod_patches import fingerprint as fingerprints

__all__ = ["KerasState", "CommitStateCallback", "run", "optimizer_variables", "broadcast_variables"]


def broadcast_variables(variables: List[Any], root_rank: int = 0) -> None:
    """Overwrite each variable with ``root_rank``'s value (Keras 3 variables, which
    ``horovod.tensorflow.broadcast_variables`` does not take)."""
    for index, var in enumerate(variables):
        var.assign(hvd.broadcast(tf.convert_to_tensor(var), root_rank,
                                 name=f"keras3.elastic.sync.{index}"))


def optimizer_variables(optimizer: Any) -> List[Any]:
    """A Keras 3 optimizer's variables, built first if needed (``iterations`` and each slot, in
    the order of the variables it was built for, so the same on every process)."""
    return list(optimizer.variables)


class KerasState(ObjectState):
    """Elastic state of a Keras 3 model and its optimizer (build the optimizer first, e.g.
    ``optimizer.build(model.trainable_variables)``), plus the keyword arguments as Python
    attributes (committed, restored and broadcast by Horovod's ``ObjectState``).
    ``fingerprint_dir``: where each rank records :meth:`fingerprint` after every sync (call
    :meth:`record_fingerprint` with ``"end"`` after training for the final state)."""

    def __init__(self, model: keras.Model, optimizer: Optional[Any] = None,
                 fingerprint_dir: Optional[str] = None, **kwargs: Any) -> None:
        self.model = model
        self.optimizer = optimizer if optimizer is not None else model.optimizer
        self.fingerprint_dir = fingerprint_dir
        self._saved_model_state: List[Any] = []
        self._saved_optimizer_state: List[Any] = []
        super().__init__(bcast_object=hvd.broadcast_object, get_rank=hvd.rank, **kwargs)
        self._save_model()

    def model_variables(self) -> List[Any]:
        return list(self.model.variables)

    def optimizer_variables(self) -> List[Any]:
        return optimizer_variables(self.optimizer)

    def shared_variables(self) -> List[Any]:
        """The variables ``sync`` broadcasts from rank 0 (override to keep some per process)."""
        return self.model_variables() + self.optimizer_variables()

    def fingerprint(self) -> str:
        """sha256 of :meth:`shared_variables`: equal on every rank right after a sync."""
        return fingerprints.state_fingerprint(self.shared_variables())

    def record_fingerprint(self, event: str, **extra: Any) -> Optional[Dict[str, Any]]:
        """Append this rank's :meth:`fingerprint` and step to ``fingerprint_dir`` (if set)."""
        if self.fingerprint_dir is None:
            return None
        return fingerprints.record(self.fingerprint_dir, event,
                                   int(self.optimizer.iterations.numpy()), hvd.rank(), hvd.size(),
                                   self.fingerprint(), **extra)

    def _save_model(self) -> None:
        self._saved_model_state = [tf.identity(v) for v in self.model_variables()]
        self._saved_optimizer_state = [tf.identity(v) for v in self.optimizer_variables()]

    def _load_model(self) -> None:
        pairs = (list(zip(self.model_variables(), self._saved_model_state))
                 + list(zip(self.optimizer_variables(), self._saved_optimizer_state)))
        for var, value in pairs:
            var.assign(value)

    def save(self) -> None:
        self._save_model()
        super().save()

    def restore(self) -> None:
        self._load_model()
        super().restore()

    def sync(self) -> None:
        """Rank 0's variables (:meth:`shared_variables`) and Python attributes to every worker;
        the result becomes the new commit."""
        broadcast_variables(self.shared_variables(), root_rank=0)
        self._save_model()
        super().sync()
        self.record_fingerprint("sync")


class CommitStateCallback(keras.callbacks.Callback):
    """Commit ``state`` every ``batches_per_commit`` batches and at every epoch end."""

    def __init__(self, state: KerasState, batches_per_commit: int = 1) -> None:
        super().__init__()
        if batches_per_commit < 1:
            raise ValueError(f"batches_per_commit must be >= 1, got {batches_per_commit}")
        self.state, self.batches_per_commit = state, int(batches_per_commit)
        self.batches_remaining = self.batches_per_commit

    def on_train_begin(self, logs: Optional[Dict[str, Any]] = None) -> None:
        self.batches_remaining = self.batches_per_commit

    def on_train_batch_end(self, batch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            self.state.commit()
            self.batches_remaining = self.batches_per_commit

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        self.state.commit()
        self.batches_remaining = self.batches_per_commit
