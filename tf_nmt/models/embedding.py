"""Shared source/target token embedding, reused transposed as the output projection (tied weights)."""
from __future__ import annotations

import math
from typing import Any, Dict, Optional

import numpy as np

from tf_nmt.compat import keras, tf
from tf_nmt.models.activation_quant import ActivationQuantization, aq_config, quantized_matmul
from tf_nmt.models.kernels import current


class SharedEmbedding(keras.layers.Layer):
    """``embed(ids)`` looks tokens up; ``project(h)`` gives logits ``h @ E^T (+ b)`` with the same E.

    Tying saves ``V * dim`` parameters and regularises small-data training. ``tie_output=False``
    gives ``project`` its own ``[V, dim]`` matrix instead: the embedding then gets only the
    lookups' sparse (IndexedSlices) gradient, which a tied matrix never has in TF 2 (the tape
    sums a sparse and a dense gradient into a dense one). With ``scale`` the
    embeddings are multiplied by sqrt(dim) (Transformer convention; E is initialised with std
    dim^-0.5 so embedded vectors have unit scale while logits stay O(1)).
    With ``activation_quantization`` the input of ``project`` is log-quantised (fixed scale).
    A separate-vocabulary model's source table is one of these used for lookups only
    (``output_bias=False``, ``project`` never called).
    ``project`` returns float32 logits, except in a layer built for the fused loss kernel
    (:func:`tf_nmt.models.kernels.use_kernels` with ``loss="fused"``, as the trainer builds its
    model): that kernel reads mixed precision's bfloat16 logits itself, so the [..., V] casts to
    float32 and of the gradient back are skipped.
    """

    def __init__(self, vocab_size: int, dim: int, scale: bool = False, output_bias: bool = True,
                 tie_output: bool = True,
                 activation_quantization: Optional[ActivationQuantization] = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.activation_quantization = ActivationQuantization.coerce(activation_quantization)
        self.vocab_size, self.dim = int(vocab_size), int(dim)
        self.scale = math.sqrt(dim) if scale else None
        self.output_bias, self.tie_output = output_bias, bool(tie_output)
        self.logits_in_compute_dtype = current("loss") == "fused"  # not config: a build choice

    def build(self, input_shape=None) -> None:
        init = keras.initializers.RandomNormal(stddev=self.dim ** -0.5)
        self.embeddings = self.add_weight(name="embeddings", shape=[self.vocab_size, self.dim],
                                          initializer=init)
        self.output_embeddings = (  # its own initializer instance: a reused one repeats values
            self.embeddings if self.tie_output else self.add_weight(
                name="output_embeddings", shape=[self.vocab_size, self.dim],
                initializer=keras.initializers.RandomNormal(stddev=self.dim ** -0.5)))
        self.bias = (self.add_weight(name="output_bias", shape=[self.vocab_size],
                                     initializer="zeros")
                     if self.output_bias else None)
        super().build(input_shape)

    def get_config(self) -> Dict[str, Any]:
        return {**super().get_config(), "vocab_size": self.vocab_size, "dim": self.dim,
                "scale": self.scale is not None, "output_bias": self.output_bias,
                "tie_output": self.tie_output,
                "activation_quantization": aq_config(self.activation_quantization)}

    def call(self, ids: tf.Tensor) -> tf.Tensor:
        x = tf.gather(self.embeddings, ids)
        return x * self.scale if self.scale is not None else x

    def project(self, h: tf.Tensor) -> tf.Tensor:
        """[..., dim] -> logits [..., vocab_size] (a 2-D matmul: cheaper than a broadcast one)."""
        flat = tf.reshape(h, [-1, self.dim])
        # Under a mixed policy h is bfloat16 while the variables stay float32: compute in h's
        # dtype, return float32 logits (softmax/loss in full precision).
        if self.activation_quantization is not None:
            logits = quantized_matmul(flat, self.output_embeddings, self.activation_quantization,
                                      transpose_w=True)
        else:
            logits = tf.matmul(flat, tf.cast(self.output_embeddings, h.dtype), transpose_b=True)
        if self.bias is not None:
            logits = tf.nn.bias_add(logits, tf.cast(self.bias, h.dtype))
        if not (self.logits_in_compute_dtype and logits.dtype == tf.bfloat16):
            logits = tf.cast(logits, tf.float32)
        return tf.reshape(logits, tf.concat([tf.shape(h)[:-1], [self.vocab_size]], 0))


def sinusoidal_positions(positions: tf.Tensor, dim: int) -> tf.Tensor:
    """Position encodings [len(positions), dim]: sin in the first half, cos in the second."""
    if dim % 2:
        raise ValueError(f"sinusoidal positions need an even dimension, got {dim}")
    inv_freq = np.exp(-math.log(10000.0) * np.arange(dim // 2) * 2.0 / dim).astype(np.float32)
    angles = tf.cast(positions, tf.float32)[:, None] * tf.constant(inv_freq)[None, :]
    return tf.concat([tf.sin(angles), tf.cos(angles)], axis=-1)
