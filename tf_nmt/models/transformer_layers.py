"""Transformer encoder/decoder blocks with pre- or post-layer-norm residual sub-layers."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from tf_nmt.compat import keras, tf
from tf_nmt.models.activation_quant import ActivationQuantization, QuantDense, aq_config
from tf_nmt.models.dropout import make_dropout
from tf_nmt.models.layer_norm import make_layer_norm
from tf_nmt.models.attention import KeyValue, MultiHeadAttention

NORMS = ("pre", "post")


class Residual(keras.layers.Layer):
    """``x + dropout(f(norm(x)))`` (pre-norm) or ``norm(x + dropout(f(x)))`` (post-norm).

    Used as ``y = fn(res.enter(x)); x = res.leave(x, y)`` so that only tensors cross layer calls;
    the enclosing layer builds it (:meth:`build`) since its ``__call__`` is not used.

    Args:
        norm: "pre" or "post".
        dropout: dropout rate on the sub-layer output (0 disables it).

    Example:
        >>> res = Residual("pre", 0.1); res.build([None, None, 256])
        >>> x = res.leave(x, ffn(res.enter(x)))
    """

    def __init__(self, norm: str, dropout: float, **kwargs) -> None:
        super().__init__(**kwargs)
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
        self.norm_position, self.rate = norm, float(dropout)
        self.pre = norm == "pre"
        self.norm = make_layer_norm(1e-6, name="norm")
        self.dropout = make_dropout(dropout)

    def build(self, input_shape) -> None:
        self.norm.build(input_shape)  # constant-initialised: creating it early draws no randomness
        super().build(input_shape)

    def get_config(self) -> Dict[str, Any]:
        return {**super().get_config(), "norm": self.norm_position, "dropout": self.rate}

    def enter(self, x: tf.Tensor) -> tf.Tensor:
        return self.norm(x) if self.pre else x

    def leave(self, x: tf.Tensor, y: tf.Tensor, training=None) -> tf.Tensor:
        if self.dropout is not None:
            y = self.dropout(y, training=training)
        return x + y if self.pre else self.norm(x + y)

    def call(self, x: tf.Tensor, y: tf.Tensor, training=None) -> tf.Tensor:
        return self.leave(x, y, training)


class FeedForward(keras.layers.Layer):
    """Position-wise ``Dense(ff_dim, relu) -> Dense(d_model)``.

    Args:
        d_model: input and output width.
        ff_dim: hidden width.
        activation_quantization: log-quantise both Dense inputs (None: off).
    """

    def __init__(self, d_model: int, ff_dim: int,
                 activation_quantization: Optional[ActivationQuantization] = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.d_model, self.ff_dim = int(d_model), int(ff_dim)
        aq = self.activation_quantization = ActivationQuantization.coerce(activation_quantization)
        self.inner = QuantDense(ff_dim, aq, activation="relu", name="inner")
        self.outer = QuantDense(d_model, aq, name="outer")

    def call(self, x: tf.Tensor) -> tf.Tensor:
        return self.outer(self.inner(x))

    def get_config(self) -> Dict[str, Any]:
        return {**super().get_config(), "d_model": self.d_model, "ff_dim": self.ff_dim,
                "activation_quantization": aq_config(self.activation_quantization)}


class _Block(keras.layers.Layer):
    """Shared by the encoder and decoder layers: their hyper-parameters, sub-layer creation
    (:meth:`make_sublayers`, per subclass) and the build of sub-layers not used via ``__call__``."""

    def __init__(self, d_model: int, num_heads: int, ff_dim: int, dropout: float,
                 attention_dropout: float, norm: str,
                 activation_quantization: Optional[ActivationQuantization] = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.activation_quantization = ActivationQuantization.coerce(activation_quantization)
        self._block_config = {"d_model": int(d_model), "num_heads": int(num_heads),
                              "ff_dim": int(ff_dim), "dropout": float(dropout),
                              "attention_dropout": float(attention_dropout), "norm": norm,
                              "activation_quantization": aq_config(self.activation_quantization)}
        self.make_sublayers(d_model, num_heads, ff_dim, dropout, attention_dropout, norm,
                            self.activation_quantization)

    def make_sublayers(self, d_model: int, num_heads: int, ff_dim: int, dropout: float,
                       attention_dropout: float, norm: str,
                       aq: Optional[ActivationQuantization]) -> None:
        """Create the block's attention, feed-forward and residual sub-layers."""
        raise NotImplementedError

    def unrouted(self) -> Tuple[keras.layers.Layer, ...]:
        """Sub-layers used through helper methods rather than ``__call__``, built here."""
        raise NotImplementedError

    def build(self, input_shape) -> None:
        for layer in self.unrouted():
            layer.build(input_shape)
        super().build(input_shape)

    def get_config(self) -> Dict[str, Any]:
        return {**super().get_config(), **self._block_config}


class EncoderLayer(_Block):
    """Self-attention (padding-masked) + feed-forward.

    Args:
        d_model, num_heads, ff_dim: widths and number of attention heads.
        dropout, attention_dropout: residual and attention-weight dropout rates.
        norm: "pre" or "post" layer normalisation.
        activation_quantization: log-quantise every matmul input (None: off).

    Example:
        >>> layer = EncoderLayer(256, 4, 1024, 0.1, 0.0, "pre")
        >>> y = layer(x, padding_bias(mask))  # x: [B, S, 256]
    """

    def make_sublayers(self, d_model, num_heads, ff_dim, dropout, attention_dropout, norm, aq):
        self.attention = MultiHeadAttention(d_model, num_heads, attention_dropout,
                                            activation_quantization=aq, name="self_attention")
        self.ffn = FeedForward(d_model, ff_dim, aq, name="ffn")
        self.res1 = Residual(norm, dropout, name="res_attention")
        self.res2 = Residual(norm, dropout, name="res_ffn")

    def unrouted(self) -> Tuple[keras.layers.Layer, ...]:
        return (self.attention, self.res1, self.res2)

    def call(self, x: tf.Tensor, bias: tf.Tensor, training=None) -> tf.Tensor:
        x = self.res1.leave(x, self.attention.self_attend(self.res1.enter(x), bias, training)[0], training)
        return self.res2.leave(x, self.ffn(self.res2.enter(x)), training)


class DecoderLayer(_Block):
    """Causal self-attention (optionally incremental) + cross-attention + feed-forward.

    Args: as :class:`EncoderLayer`. ``call`` also takes the encoder memory's keys/values and an
    optional self-attention cache, and returns the new cache.
    """

    def make_sublayers(self, d_model, num_heads, ff_dim, dropout, attention_dropout, norm, aq):
        self.self_attention = MultiHeadAttention(d_model, num_heads, attention_dropout,
                                                 activation_quantization=aq, name="self_attention")
        self.cross_attention = MultiHeadAttention(d_model, num_heads, attention_dropout,
                                                  self_attention=False, activation_quantization=aq,
                                                  name="cross_attention")
        self.ffn = FeedForward(d_model, ff_dim, aq, name="ffn")
        self.res1 = Residual(norm, dropout, name="res_self")
        self.res2 = Residual(norm, dropout, name="res_cross")
        self.res3 = Residual(norm, dropout, name="res_ffn")

    def unrouted(self) -> Tuple[keras.layers.Layer, ...]:
        return (self.self_attention, self.cross_attention, self.res1, self.res2, self.res3)

    def call(self, x: tf.Tensor, self_bias: Optional[tf.Tensor], memory_kv: KeyValue,
             memory_bias: tf.Tensor, cache: Optional[KeyValue] = None,
             training=None) -> Tuple[tf.Tensor, KeyValue]:
        y, new_cache = self.self_attention.self_attend(self.res1.enter(x), self_bias, training, cache)
        x = self.res1.leave(x, y, training)
        y = self.cross_attention.cross_attend(self.res2.enter(x), memory_kv, memory_bias, training)
        x = self.res2.leave(x, y, training)
        return self.res3.leave(x, self.ffn(self.res3.enter(x)), training), new_cache
