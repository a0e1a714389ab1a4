"""Which layer normalisation the models' layers use: Keras's, or the C++ fused op.

``train.norm_kernel`` (like ``train.loss_kernel`` and ``train.dropout_kernel``) is resolved once
by :func:`resolve_norm_kernel`; the trainer builds the model inside
:func:`tf_nmt.models.kernels.use_kernels`, and every layer norm a layer creates through
:func:`make_layer_norm` takes that kernel. Models built elsewhere (evaluation, export, tests) get
Keras's, so a SavedModel needs only TensorFlow.

The fused layer, :class:`FusedLayerNormalization`, is a ``keras.layers.LayerNormalization``
(same config, same ``gamma``/``beta`` variables, so checkpoints are interchangeable) whose call
is one C++ kernel each way (:func:`tf_nmt.ops.layer_norm.fused_layer_norm`). Keras takes its own
fused path only for epsilon >= 1.001e-5; with the Transformer's 1e-6 it composes moments and
batch_normalization from about eight element-wise ops forward (two casts more under mixed
bfloat16) and twice as many backward.
"""
from __future__ import annotations

from tf_nmt.compat import keras, tf
from tf_nmt.models.kernels import current, resolve_kernel


@keras.utils.register_keras_serializable(package="tf_nmt")
class FusedLayerNormalization(keras.layers.LayerNormalization):
    """``keras.layers.LayerNormalization`` over the last axis, computed by the C++ fused op (CPU).

    Args:
        epsilon: added to each row's variance (> 0).
        Other arguments as ``keras.layers.LayerNormalization``; ``axis`` must be the last one and
        ``center`` / ``scale`` must be on (what the models use).

    Example:
        >>> norm = FusedLayerNormalization(epsilon=1e-6)
        >>> y = norm(tf.random.normal([8, 20, 256]))
    """

    def __init__(self, axis=-1, epsilon: float = 1e-3, center: bool = True, scale: bool = True,
                 **kwargs) -> None:
        if not (center and scale):
            raise ValueError("FusedLayerNormalization needs center=True and scale=True")
        if axis not in (-1, [-1], (-1,)):
            raise ValueError(f"FusedLayerNormalization normalises the last axis only, got {axis!r}")
        super().__init__(axis=-1, epsilon=epsilon, center=center, scale=scale, **kwargs)

    def call(self, inputs):
        from tf_nmt.ops.layer_norm import fused_layer_norm

        inputs = tf.cast(inputs, self.compute_dtype)
        return fused_layer_norm(inputs, self.gamma, self.beta, self.epsilon)


def resolve_norm_kernel(kernel: str = "auto", jit_compile: bool = False) -> str:
    """``"fused"`` or ``"tf"`` for ``train.norm_kernel`` (see
    :func:`tf_nmt.models.kernels.resolve_kernel`)."""
    return resolve_kernel("norm_kernel", kernel, jit_compile)


def make_layer_norm(epsilon: float, **kwargs) -> keras.layers.LayerNormalization:
    """A last-axis layer normalisation with the current kernel (see :func:`use_kernels`)."""
    cls = FusedLayerNormalization if current("norm") == "fused" else keras.layers.LayerNormalization
    return cls(epsilon=epsilon, **kwargs)
