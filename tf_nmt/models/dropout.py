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
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Optional

from tf_nmt.compat import KERAS3, keras, tf
from tf_nmt.models.kernels import KERNEL_SETTINGS, current, resolve_kernel, use_kernels

DROPOUT_KERNELS = KERNEL_SETTINGS
_SEED_MAX = 2 ** 62


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

            seed = tf.random.uniform([], 0, _SEED_MAX, dtype=tf.int64)
            return seeded_dropout(inputs, self.rate, seed)

        return tf.__internal__.smart_cond.smart_cond(training, dropped,
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
    cls = SeededDropout if current("dropout") == "fused" else keras.layers.Dropout
    return cls(rate, **kwargs)
