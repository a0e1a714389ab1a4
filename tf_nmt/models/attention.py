"""Multi-head scaled dot-product attention with an incremental (key/value cache) self-attention path.

Masks are additive biases broadcastable to ``[B, heads, T_query, T_key]`` (0 keep, -1e9 drop), so
one code path serves padding and causal masks.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from tf_nmt.compat import keras, tf
from tf_nmt.models.activation_quant import ActivationQuantization, QuantDense, aq_config
from tf_nmt.models.dropout import make_dropout

NEG_INF = -1e9
KeyValue = Tuple[tf.Tensor, tf.Tensor]


def padding_bias(mask: tf.Tensor) -> tf.Tensor:
    """float mask [B,S] (1 = real token) -> additive bias [B,1,1,S]."""
    return ((1.0 - mask) * NEG_INF)[:, None, None, :]


def causal_bias(length: tf.Tensor) -> tf.Tensor:
    """[T,T] bias that lets position i attend to positions <= i only.

    Deliberately rank 2: on CPU, oneDNN fuses ``matmul(q * c, k) + bias`` and its kernel is ~500x
    slower for a [1,1,T,T] addend than for a [T,T] one (TF 2.21).
    """
    allowed = tf.linalg.band_part(tf.ones([length, length]), -1, 0)
    return (1.0 - allowed) * NEG_INF


class MultiHeadAttention(keras.layers.Layer):
    """Self- (fused q/k/v projection) or cross-attention (q from the decoder, k/v from memory).

    Args:
        d_model: model width (divisible by ``num_heads``).
        num_heads: number of heads.
        dropout: dropout on the attention weights.
        self_attention: fused q/k/v projection (True) or separate q and k/v (cross-attention).
        activation_quantization: log-quantise the projections' inputs (None: off).

    Example:
        >>> mha = MultiHeadAttention(256, 4)
        >>> y, (k, v) = mha.self_attend(x, padding_bias(mask))
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0,
                 self_attention: bool = True,
                 activation_quantization: Optional[ActivationQuantization] = None, **kwargs) -> None:
        super().__init__(**kwargs)
        if d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        self.d_model, self.num_heads, self.rate = d_model, num_heads, float(dropout)
        self.depth = d_model // num_heads
        self.self_attention = self_attention
        aq = self.activation_quantization = ActivationQuantization.coerce(activation_quantization)
        if self_attention:
            self.qkv = QuantDense(3 * d_model, aq, name="qkv")
        else:
            self.q = QuantDense(d_model, aq, name="q")
            self.kv = QuantDense(2 * d_model, aq, name="kv")
        self.out = QuantDense(d_model, aq, name="out")
        self.dropout = make_dropout(dropout)

    def _split(self, x: tf.Tensor) -> tf.Tensor:
        """[B,T,d] -> [B,H,T,depth]."""
        shape = tf.shape(x)
        x = tf.reshape(x, [shape[0], shape[1], self.num_heads, self.depth])
        return tf.transpose(x, [0, 2, 1, 3])

    def _merge(self, x: tf.Tensor) -> tf.Tensor:
        """[B,H,T,depth] -> [B,T,d]."""
        shape = tf.shape(x)
        x = tf.transpose(x, [0, 2, 1, 3])
        return tf.reshape(x, [shape[0], shape[2], self.d_model])

    def _attend(self, q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, bias: Optional[tf.Tensor],
                training) -> tf.Tensor:
        scores = tf.matmul(q * (self.depth ** -0.5), k, transpose_b=True)
        if bias is not None:
            scores += tf.cast(bias, scores.dtype)
        # Softmax in float32 also under a mixed (bfloat16) policy; a no-op cast in float32.
        weights = tf.cast(tf.nn.softmax(tf.cast(scores, tf.float32)), v.dtype)
        if self.dropout is not None:
            weights = self.dropout(weights, training=training)
        return self.out(self._merge(tf.matmul(weights, v)))

    def memory_kv(self, memory: tf.Tensor) -> KeyValue:
        """Cross-attention keys and values [B,H,S,depth]; computed once per source for decoding."""
        k, v = tf.split(self.kv(memory), 2, axis=-1)
        return self._split(k), self._split(v)

    def cross_attend(self, x: tf.Tensor, memory_kv: KeyValue, bias: tf.Tensor, training=None) -> tf.Tensor:
        return self._attend(self._split(self.q(x)), memory_kv[0], memory_kv[1], bias, training)

    def self_attend(self, x: tf.Tensor, bias: Optional[tf.Tensor], training=None,
                    cache: Optional[KeyValue] = None) -> Tuple[tf.Tensor, KeyValue]:
        """Attention of x over itself; with ``cache`` the new keys/values are appended to it."""
        q, k, v = (self._split(t) for t in tf.split(self.qkv(x), 3, axis=-1))
        if cache is not None:
            k = tf.concat([cache[0], k], axis=2)
            v = tf.concat([cache[1], v], axis=2)
        return self._attend(q, k, v, bias, training), (k, v)

    def call(self, x: tf.Tensor, bias: Optional[tf.Tensor] = None, training=None) -> tf.Tensor:
        return self.self_attend(x, bias, training)[0]

    def build(self, input_shape) -> None:
        """Marks the layer built: its projections build on first use (``self_attend`` etc.)."""
        super().build(input_shape)

    def get_config(self) -> Dict[str, Any]:
        return {**super().get_config(), "d_model": self.d_model, "num_heads": self.num_heads,
                "dropout": self.rate, "self_attention": self.self_attention,
                "activation_quantization": aq_config(self.activation_quantization)}
