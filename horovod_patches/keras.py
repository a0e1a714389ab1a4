"""``horovod.tensorflow.keras`` bound to Keras 2 (tf_keras) — our shim for Horovod 0.28.1 on TF 2.16+.

Why: Horovod 0.28.1 takes its Keras classes from ``tensorflow.keras`` (tf_keras only when
TF_USE_LEGACY_KERAS=1 was set before TensorFlow was imported, Keras 3 otherwise, where the
optimizer wrapper silently never averages) and its backend ``K`` from ``import keras`` — always
Keras 3 on TF >= 2.16, which lacks the ``K.constant`` etc. its callbacks call. This module:

* selects Keras 2 before the import and refuses to go on if Horovod got Keras 3 classes;
* rebinds the ``K`` globals of ``horovod.tensorflow.keras`` and its ``callbacks`` module to
  ``tf_keras.backend`` (the callbacks look ``K`` up when they are constructed);
* wraps optimizers so learning-rate schedule objects survive Horovod's ``from_config`` rebuild
  (project schedules need not be registered as Keras serializables).
"""
from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

_module: Any = None


def import_horovod_keras() -> Any:
    """``horovod.tensorflow.keras`` patched to use tf_keras (imported and patched once)."""
    global _module
    if _module is not None:
        return _module
    import tf_keras  # noqa: PLC0415

    import horovod.tensorflow.keras as hvd_keras  # noqa: PLC0415
    from horovod.tensorflow.keras import callbacks as hvd_callbacks  # noqa: PLC0415

    if not issubclass(hvd_callbacks.BroadcastGlobalVariablesCallback, tf_keras.callbacks.Callback):
        raise RuntimeError(
            "horovod.tensorflow.keras was bound to Keras 3: set TF_USE_LEGACY_KERAS=1 before "
            "TensorFlow is first imported (import tf_nmt.compat or horovod_patches first)")
    for module in (hvd_keras, hvd_callbacks):
        module.K = tf_keras.backend
    _module = hvd_keras
    return _module


def import_horovod_keras_elastic() -> Any:
    """``horovod.tensorflow.keras.elastic`` (``KerasState``, ``CommitStateCallback``, ``run``)
    with its callbacks bound to tf_keras, like :func:`import_horovod_keras`."""
    import tf_keras  # noqa: PLC0415

    import_horovod_keras()
    from horovod.tensorflow.keras import elastic  # noqa: PLC0415

    if not issubclass(elastic.CommitStateCallback, tf_keras.callbacks.Callback):
        raise RuntimeError("horovod.tensorflow.keras.elastic was bound to Keras 3: set "
                           "TF_USE_LEGACY_KERAS=1 before TensorFlow is first imported")
    return elastic


def _optimizer_bases() -> tuple:
    import tf_keras  # noqa: PLC0415

    return tf_keras.optimizers.Optimizer, tf_keras.optimizers.legacy.Optimizer


def distributed_optimizer(optimizer: Any, **kwargs: Any) -> Any:
    """``hvd.DistributedOptimizer(optimizer, **kwargs)`` for a tf_keras optimizer (current or
    ``tf_keras.optimizers.legacy``).

    Horovod rebuilds the optimizer from ``get_config()``; an unregistered learning-rate schedule
    would not deserialize, so the schedule's class is put in scope for the rebuild and the
    original schedule object is put back afterwards.
    """
    import tf_keras  # noqa: PLC0415

    hvd_keras = import_horovod_keras()
    current, legacy = _optimizer_bases()
    if not isinstance(optimizer, (current, legacy)):
        raise TypeError(f"expected a tf_keras optimizer, got {type(optimizer).__module__}."
                        f"{type(optimizer).__name__} (Horovod 0.28.1 does not average gradients "
                        "of Keras 3 optimizers)")
    is_legacy = isinstance(optimizer, legacy)
    schedule = (optimizer._hyper.get("learning_rate") if is_legacy
                else getattr(optimizer, "_learning_rate", None))
    is_schedule = isinstance(schedule, tf_keras.optimizers.schedules.LearningRateSchedule)
    scope = {type(schedule).__name__: type(schedule)} if is_schedule else {}
    with tf_keras.utils.custom_object_scope(scope):
        wrapped = hvd_keras.DistributedOptimizer(optimizer, **kwargs)
    if is_schedule and is_legacy:
        wrapped._set_hyper("learning_rate", schedule)
    elif is_schedule:
        wrapped._learning_rate = schedule
    return wrapped
