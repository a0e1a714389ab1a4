"""Horovod data-parallel training for Keras 3 (``import keras``, TensorFlow backend).

Horovod 0.28.1's own ``horovod.tensorflow.keras`` does not work with Keras 3: its
``DistributedOptimizer`` trains without ever averaging the gradients (ranks drift apart
silently) and its broadcast callback crashes (horovod/horovod#4290). This package is our own
replacement, built only on ``horovod.tensorflow`` collectives and the public Keras 3 API:

* :class:`DistributedOptimizer` — wraps a Keras 3 optimizer; gradients are averaged over the
  ranks before each update (optionally every ``backward_passes_per_step`` batches);
* :class:`LossScaleOptimizer` — Keras 3's dynamic loss scaling for ``mixed_float16``, with an
  overflow check that agrees on every rank (one scalar allreduce), so ranks skip the same steps
  and keep equal loss scales; put it around the :class:`DistributedOptimizer`;
* :class:`BroadcastInitialState`, :class:`MetricAverage`, :class:`LearningRateWarmup` —
  callbacks for ``model.fit``.
* :mod:`horovod_patches.keras3.elastic` — elastic training's state (``KerasState``),
  ``CommitStateCallback`` and ``run`` (import it explicitly).

Usage (see docs/keras.md and ``examples/train_mnist_like.py``)::

    import horovod.tensorflow as hvd
    import keras
    from horovod_patches import keras3 as hvd_keras3

    hvd.init()
    model.compile(optimizer=hvd_keras3.DistributedOptimizer(keras.optimizers.Adam(1e-3 * hvd.size())),
                  loss=..., jit_compile=False)
    model.fit(my_shard_of_the_data, callbacks=[hvd_keras3.MetricAverage(),
                                               hvd_keras3.BroadcastInitialState()])

Importing this package imports TensorFlow, Keras 3 and ``horovod.tensorflow`` (not
``horovod.tensorflow.keras``); it does not set ``TF_USE_LEGACY_KERAS``.
"""
from horovod_patches.keras3.callbacks import (BroadcastInitialState, LearningRateWarmup,
                                              MetricAverage, broadcast_state)
from horovod_patches.keras3.loss_scale import LossScaleOptimizer
from horovod_patches.keras3.optimizer import DistributedOptimizer

__all__ = ["DistributedOptimizer", "LossScaleOptimizer", "BroadcastInitialState", "MetricAverage",
           "LearningRateWarmup", "broadcast_state"]
