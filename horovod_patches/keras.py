"""``horovod.tensorflow.keras`` bound to Keras 2 (tf_keras): our shim for Horovod 0.28.1, TF 2.16+.

Why: Horovod 0.28.1 takes its Keras classes from ``tensorflow.keras`` at import (Keras 3 on TF >=
2.16 unless TF_USE_LEGACY_KERAS=1 was set, and under Keras 3 its optimizer wrapper silently never
averages) and its backend ``K`` from ``import keras`` (always Keras 3, which lacks the
``K.constant`` etc. its callbacks call). tf-nmt's models are tf_keras objects whatever Keras the
process uses, and tf-nmt never sets TF_USE_LEGACY_KERAS, so this module:

* imports ``horovod.tensorflow.keras`` (with its ``callbacks`` and ``elastic`` submodules) with
  ``tensorflow.keras`` bound to tf_keras for that import only, then puts back what was there:
  ``tf.keras`` stays whatever the process had (Keras 3 by default);
* refuses to go on if Horovod's Keras classes are not tf_keras's (the process imported
  ``horovod.tensorflow.keras`` itself, with Keras 3, before);
* rebinds the ``K`` globals of ``horovod.tensorflow.keras`` and its ``callbacks`` module to
  ``tf_keras.backend`` (the callbacks look ``K`` up when they are constructed), and the ``tf`` of
  its ``elastic`` module to TensorFlow with tf_keras as ``keras`` (read there at construction);
* wraps optimizers so learning-rate schedule objects survive Horovod's ``from_config`` rebuild
  (project schedules need not be registered as Keras serializables).

``horovod.tensorflow`` itself is imported as it is (its ``SyncBatchNormalization`` follows the
process's ``tf.keras``). For a Keras 3 model use :mod:`horovod_patches.keras3`, not
``horovod.tensorflow.keras``.
"""
from __future__ import annotations

import contextlib
import importlib
import sys
import types
from typing import Any, Iterator

_module: Any = None
_KERAS2_API = "tf_keras.api._v2.keras"  # what TensorFlow's tf.keras is under TF_USE_LEGACY_KERAS=1
_REFUSAL = ("horovod.tensorflow.keras was imported with Keras 3 classes before tf-nmt's Horovod "
            "training, which needs them from Keras 2 (tf_keras): call "
            "horovod_patches.keras.import_horovod_keras() (or start tf-nmt's training) before "
            "importing horovod.tensorflow.keras, and use horovod_patches.keras3 for Keras 3 models")


@contextlib.contextmanager
def _tensorflow_keras_bound_to(api: types.ModuleType) -> Iterator[None]:
    """``tensorflow.keras`` is ``api`` inside the block; afterwards it is what it was (TF's lazy
    loader, loaded or not, or the module it resolved to), so the process's Keras is unchanged."""
    import tensorflow  # noqa: PLC0415

    missing = object()
    saved = tensorflow.__dict__.get("keras", missing)  # not getattr: that would load Keras
    tensorflow.keras = api
    try:
        yield
    finally:
        if saved is missing:
            del tensorflow.keras
        else:
            tensorflow.keras = saved


class _TensorFlowWithKeras2(types.ModuleType):
    """``tensorflow`` whose ``keras`` is tf_keras's API: the ``tf`` of Horovod's Keras
    ``elastic`` module, which reads ``tf.keras.backend`` when its state and callbacks are built."""

    def __init__(self, tensorflow: types.ModuleType, api: types.ModuleType) -> None:
        super().__init__(tensorflow.__name__, tensorflow.__doc__)
        self.keras = api
        self._tensorflow = tensorflow

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tensorflow, name)


def import_horovod_keras() -> Any:
    """``horovod.tensorflow.keras`` patched to use tf_keras (imported and patched once)."""
    global _module
    if _module is not None:
        return _module
    import tensorflow  # noqa: PLC0415
    import tf_keras  # noqa: PLC0415

    import horovod.tensorflow  # noqa: F401, PLC0415 - first, with the process's own tf.keras

    api = importlib.import_module(_KERAS2_API)
    if "horovod.tensorflow.keras" not in sys.modules:
        with _tensorflow_keras_bound_to(api):
            import horovod.tensorflow.keras  # noqa: F401, PLC0415 - also callbacks, elastic
    hvd_keras = sys.modules["horovod.tensorflow.keras"]
    hvd_callbacks, elastic = hvd_keras.callbacks, hvd_keras.elastic
    if not (issubclass(hvd_callbacks.BroadcastGlobalVariablesCallback, tf_keras.callbacks.Callback)
            and issubclass(elastic.CommitStateCallback, tf_keras.callbacks.Callback)):
        raise RuntimeError(_REFUSAL)
    for module in (hvd_keras, hvd_callbacks):
        module.K = tf_keras.backend
    elastic.tf = _TensorFlowWithKeras2(tensorflow, api)
    _module = hvd_keras
    return _module


def import_horovod_keras_elastic() -> Any:
    """``horovod.tensorflow.keras.elastic`` (``KerasState``, ``CommitStateCallback``, ``run``)
    bound to tf_keras, like :func:`import_horovod_keras`."""
    return import_horovod_keras().elastic


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
