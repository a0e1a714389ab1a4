"""Which dropout the models' layers use: Keras's, or the C++ seeded dropout op.

``train.dropout_kernel`` (like ``train.loss_kernel``) is resolved once by
:func:`resolve_dropout_kernel`; the trainer builds the model inside :func:`use_kernel`, and every
dropout a layer creates through :func:`make_dropout` takes that kernel. Models built elsewhere
(evaluation, export, tests) get Keras's dropout, which is inactive there anyway.

The fused layer, :class:`SeededDropout`, is a ``keras.layers.Dropout`` (same config, same
checkpoint structure) whose training branch calls :func:`tf_nmt.ops.dropout.seeded_dropout`:
one pass forward and one backward with the mask regenerated from an int64 seed drawn per call,
against Keras's RandomUniform, compare, multiply and select with a stored mask. Same
distribution, a different random stream.

Training draws each mask's seed from :class:`DropoutSeeds` (both kernels, inside
:func:`seeded_by`): seed k of a run is a function of ``train.seed`` and k alone, and k, the
masks drawn so far, is a variable the trainer checkpoints, so a resumed run draws the masks an
uninterrupted one would have (a stateful random op restarts its stream in every process).
Without it (models trained elsewhere) the layers draw as before.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Optional

from tf_nmt.compat import KERAS3, keras, tf
from tf_nmt.models.kernels import KERNEL_SETTINGS, current, resolve_kernel, use_kernels

DROPOUT_KERNELS = KERNEL_SETTINGS
_SEED_MAX = 2 ** 62
CHECKPOINT_KEY = "dropout_draws"  # the checkpoint's dependency holding the masks drawn so far


class DropoutSeeds:
    """The seeds of training's dropout masks: the k-th is a stateless hash of (``seed``, k).

    ``draws`` (int64, k so far) goes into the run's checkpoints (:data:`CHECKPOINT_KEY`); the
    layers of one step draw in program order (their ``assign_add`` on one variable is ordered
    by TensorFlow's automatic control dependencies), so the sequence does not depend on timing.
    """

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)
        self.draws = tf.Variable(0, dtype=tf.int64, trainable=False, name=CHECKPOINT_KEY)

    def next_seed(self) -> tf.Tensor:
        """The next mask's seed, a pair of int64 (for the stateless ops)."""
        k = self.draws.assign_add(1)
        return tf.stack([tf.constant(self.seed, tf.int64), tf.cast(k, tf.int64)])

    def restore(self, prefix: Optional[str]) -> bool:
        """``draws`` from checkpoint ``prefix``; False (and 0) when it holds none (a checkpoint
        written before the count was kept, or no ``prefix``)."""
        value, found = 0, False
        if prefix:
            reader = tf.train.load_checkpoint(prefix)
            key = f"{CHECKPOINT_KEY}/.ATTRIBUTES/VARIABLE_VALUE"
            found = reader.has_tensor(key)
            value = int(reader.get_tensor(key)) if found else 0
        self.draws.assign(value)
        return found


_SEEDS: Optional[DropoutSeeds] = None


@contextlib.contextmanager
def seeded_by(seeds: Optional[DropoutSeeds]) -> Iterator[None]:
    """Dropout layers traced inside draw their masks' seeds from ``seeds``."""
    global _SEEDS
    previous, _SEEDS = _SEEDS, seeds
    try:
        yield
    finally:
        _SEEDS = previous


def _seed_pair() -> Optional[tf.Tensor]:
    return _SEEDS.next_seed() if _SEEDS is not None else None


@keras.utils.register_keras_serializable(package="tf_nmt")
class SeededDropout(keras.layers.Dropout):
    """``keras.layers.Dropout`` computed by the C++ seeded dropout op (CPU).

    Args:
        rate: drop probability in ``[0, 1)``; ``noise_shape`` is not supported (None only).

    Example:
        >>> layer = SeededDropout(0.1)
        >>> y = layer(x, training=True)
    """

    def __init__(self, rate: float, noise_shape=None, seed=None, **kwargs) -> None:
        if noise_shape is not None:
            raise ValueError("SeededDropout has no noise_shape (its mask is per element)")
        if not 0.0 <= float(rate) < 1.0:
            raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
        super().__init__(rate, seed=seed, **kwargs)

    def call(self, inputs, training=None):
        if self.rate == 0:
            return tf.identity(inputs)
        if training is None:  # Keras 3 passes the outer call's flag down; no global phase
            training = False if KERAS3 else keras.backend.learning_phase()

        def dropped():
            from tf_nmt.ops.dropout import seeded_dropout

            pair = _seed_pair()
            seed = (tf.random.uniform([], 0, _SEED_MAX, dtype=tf.int64) if pair is None else
                    tf.random.stateless_uniform([], pair, 0, _SEED_MAX, dtype=tf.int64))
            return seeded_dropout(inputs, self.rate, seed)

        return tf.__internal__.smart_cond.smart_cond(training, dropped,
                                                     lambda: tf.identity(inputs))


@keras.utils.register_keras_serializable(package="tf_nmt")
class CountedDropout(keras.layers.Dropout):
    """Keras's dropout (``train.dropout_kernel=tf``) whose masks, in training under
    :func:`seeded_by`, come from TensorFlow's stateless dropout with the run's counted seeds."""

    def call(self, inputs, training=None):
        if _SEEDS is None or self.rate == 0:
            return super().call(inputs, training=training)
        if training is None:
            training = False if KERAS3 else keras.backend.learning_phase()
        return tf.__internal__.smart_cond.smart_cond(
            training,
            lambda: tf.nn.experimental.stateless_dropout(inputs, self.rate, _seed_pair()),
            lambda: tf.identity(inputs))


def resolve_dropout_kernel(kernel: str = "auto", jit_compile: bool = False) -> str:
    """``"fused"`` or ``"tf"`` for ``train.dropout_kernel`` (see
    :func:`tf_nmt.models.kernels.resolve_kernel`)."""
    return resolve_kernel("dropout_kernel", kernel, jit_compile)


@contextlib.contextmanager
def use_kernel(kernel: str) -> Iterator[None]:
    """Layers built inside take ``kernel`` ("fused" or "tf", as resolved) for their dropout."""
    with use_kernels(dropout=kernel):
        yield


def make_dropout(rate: float, **kwargs) -> Optional[keras.layers.Dropout]:
    """A dropout layer of ``rate`` with the current kernel, or None when ``rate`` is 0."""
    if rate <= 0:
        return None
    cls = SeededDropout if current("dropout") == "fused" else CountedDropout
    return cls(rate, **kwargs)
