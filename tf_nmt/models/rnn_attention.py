"""Attention of RNN decoder states over encoder outputs: Luong (general) or Bahdanau (additive).

Keys are projected from the encoder outputs once (``keys(memory)``) so that step-by-step decoding
does not redo it; ``call`` takes queries [B,T,q] and returns contexts [B,T,memory_dim].
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from tf_nmt.compat import keras, tf
from tf_nmt.models.activation_quant import ActivationQuantization, QuantDense, aq_config

NEG_INF = -1e9
ATTENTIONS = ("luong", "bahdanau")


class LuongAttention(keras.layers.Layer):
    """score(q, m) = q . (W m); ``activation_quantization`` log-quantises the projections' inputs."""

    def __init__(self, units: int,
                 activation_quantization: Optional[ActivationQuantization] = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.units = int(units)
        self.activation_quantization = ActivationQuantization.coerce(activation_quantization)
        self.key_proj = QuantDense(units, self.activation_quantization, use_bias=False, name="key")

    def get_config(self) -> Dict[str, Any]:
        return {**super().get_config(), "units": self.units,
                "activation_quantization": aq_config(self.activation_quantization)}

    def keys(self, memory: tf.Tensor) -> tf.Tensor:
        return self.key_proj(memory)

    def scores(self, query: tf.Tensor, keys: tf.Tensor) -> tf.Tensor:
        return tf.matmul(query, keys, transpose_b=True)

    def call(self, query: tf.Tensor, keys: tf.Tensor, memory: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
        # Softmax in float32 under a mixed policy: bf16's 8-bit mantissa blurs close scores.
        scores = tf.cast(self.scores(query, keys), tf.float32)
        weights = tf.nn.softmax(scores + ((1.0 - tf.cast(mask, tf.float32)) * NEG_INF)[:, None, :])
        return tf.matmul(tf.cast(weights, memory.dtype), memory)


class BahdanauAttention(LuongAttention):
    """score(q, m) = v . tanh(W m + U q + b)."""

    def __init__(self, units: int,
                 activation_quantization: Optional[ActivationQuantization] = None, **kwargs) -> None:
        super().__init__(units, activation_quantization, **kwargs)
        self.query_proj = QuantDense(units, self.activation_quantization, name="query")

    def build(self, input_shape=None) -> None:
        self.v = self.add_weight(name="v", shape=[self.units],
                                 initializer=keras.initializers.RandomUniform(-0.1, 0.1))
        super().build(input_shape)

    def scores(self, query: tf.Tensor, keys: tf.Tensor) -> tf.Tensor:
        hidden = tf.tanh(keys[:, None, :, :] + self.query_proj(query)[:, :, None, :])  # [B,T,S,u]
        return tf.reduce_sum(hidden * self.v, axis=-1)


def make_attention(kind: str, units: int,
                   activation_quantization: Optional[ActivationQuantization] = None) -> LuongAttention:
    if kind == "luong":
        return LuongAttention(units, activation_quantization, name="attention")
    if kind == "bahdanau":
        return BahdanauAttention(units, activation_quantization, name="attention")
    raise ValueError(f"attention must be one of {ATTENTIONS}, got {kind!r}")
