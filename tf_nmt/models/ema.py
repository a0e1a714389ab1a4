"""Exponential moving average of a model's trainable weights (``train.ema_decay``).

The shadow weights are a float32 copy of ``model.trainable_variables`` (float32 also under a
mixed policy), updated after every optimizer step ``s`` (``optimizer.iterations`` after the
step, 1 for the first) from the weights that step produced::

    d_s = 0                                           for s == 1 (the shadow becomes w_1)
    d_s = min(decay, (1 + s) / (10 + s))              for s >= 2
    shadow = d_s * shadow + (1 - d_s) * w

This is OpenNMT-tf's ``moving_average_decay`` (TensorFlow's ``ExponentialMovingAverage`` with
``num_updates``, created after the first step): the warm-up keeps the average from being
dominated by the random initial weights early on, and since ``d_s`` depends only on ``s`` a
resumed run continues the same average exactly.

The shadow is the checkpoint object :data:`CHECKPOINT_KEY` (``ema/shadow/<i>``, in the order of
``model.trainable_variables``); :func:`restore_ema_weights` loads it into a model in place of the
raw weights (``--weights ema`` of evaluate, export, quantize and average-checkpoints).
"""
from __future__ import annotations

from typing import List, Sequence

from tf_nmt.compat import keras, tf
from tf_nmt.errors import UserError

CHECKPOINT_KEY = "ema"
WEIGHTS = ("raw", "ema")  # which weights --weights loads


class ShadowWeights(tf.Module):
    """The checkpointed state: one float32 variable per trainable variable (nothing else)."""

    def __init__(self, variables: Sequence[tf.Variable]) -> None:
        super().__init__(name="ema")
        with tf.init_scope():
            self.shadow = [tf.Variable(tf.cast(tf.convert_to_tensor(v), tf.float32),
                                       trainable=False, dtype=tf.float32,
                                       name=f"ema_{i}") for i, v in enumerate(variables)]


def effective_decay(decay: float, step):
    """``d_s`` of the module docstring (``step``: a float32 tensor, the step just taken)."""
    warm = tf.minimum(tf.constant(decay, tf.float32), (1.0 + step) / (10.0 + step))
    return tf.where(step <= 1.0, tf.constant(0.0, tf.float32), warm)


class WeightAverager:
    """The shadow of ``model``'s trainable weights and its per-step update (one tf.function)."""

    def __init__(self, model: keras.Model, decay: float) -> None:
        if not 0.0 < decay < 1.0:
            raise ValueError(f"EMA decay must be in (0, 1), got {decay}")
        self.decay = float(decay)
        self.model = model
        self.state = ShadowWeights(model.trainable_variables)

        @tf.function
        def update(step):
            d = effective_decay(self.decay, tf.cast(step, tf.float32))
            for s, w in zip(self.state.shadow, self.model.trainable_variables):
                s.assign(d * s + (1.0 - d) * tf.cast(w, tf.float32))

        self._update = update

    def update(self) -> None:
        """Fold in the weights after the optimizer step just taken."""
        self._update(self.model.optimizer.iterations)

    def reset(self) -> None:
        """Start the average from the current weights (a resume of a run trained without it)."""
        for s, w in zip(self.state.shadow, self.model.trainable_variables):
            s.assign(tf.cast(w, tf.float32))

    def numpy(self) -> List:
        return [s.numpy() for s in self.state.shadow]


def checkpoint_has_ema(prefix: str) -> bool:
    """True when the checkpoint ``prefix`` holds shadow weights."""
    return any(name.startswith(f"{CHECKPOINT_KEY}/") for name, _ in tf.train.list_variables(prefix))


def restore_ema_weights(model: keras.Model, prefix: str) -> None:
    """Overwrite ``model``'s trainable weights with the shadow weights saved in ``prefix``;
    UserError (one line) where the checkpoint holds none."""
    if not checkpoint_has_ema(prefix):
        raise UserError(f"checkpoint {prefix} holds no EMA weights (its run was trained with "
                        "train.ema_decay=0, or it is an average of checkpoints); use --weights raw")
    state = ShadowWeights(model.trainable_variables)
    saved = sum(1 for name, _ in tf.train.list_variables(prefix)
                if name.startswith(f"{CHECKPOINT_KEY}/shadow/"))
    if saved != len(state.shadow):
        raise UserError(f"checkpoint {prefix} holds {saved} EMA tensors but the model has "
                        f"{len(state.shadow)} trainable variables")
    tf.train.Checkpoint(**{CHECKPOINT_KEY: state}).restore(prefix).expect_partial() \
        .assert_existing_objects_matched()
    for v, s in zip(model.trainable_variables, state.shadow):
        v.assign(tf.cast(s, v.dtype))
