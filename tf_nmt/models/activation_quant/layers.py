"""Keras layers whose matmul inputs are log-quantised (:func:`quantized_matmul`): a Dense, an
LSTM cell, and the LSTM layer the models build (plain Keras when quantisation is off)."""
from __future__ import annotations

from typing import Any, Dict, Optional

from tf_nmt.compat import keras, tf
from tf_nmt.models.activation_quant.config import ActivationQuantization, aq_config
from tf_nmt.models.activation_quant.engines import quantized_matmul


class QuantDense(keras.layers.Dense):
    """``keras.layers.Dense`` whose input is log-quantised with a fixed scale before the matmul
    (bias and activation stay float); with ``activation_quantization=None`` it is a plain Dense.

    Args:
        units: output width.
        activation_quantization: None, an :class:`ActivationQuantization` or its dict.
        **kwargs: as ``keras.layers.Dense``.

    Example:
        >>> layer = QuantDense(8, activation_quantization={"bits": 4, "scale": 2.0})
        >>> y = layer(tf.random.normal([2, 5, 16]))   # [2, 5, 8]
    """

    def __init__(self, units: int, activation_quantization=None, **kwargs) -> None:
        super().__init__(units, **kwargs)
        self.activation_quantization = ActivationQuantization.coerce(activation_quantization)

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        if self.activation_quantization is None:
            return super().call(inputs)
        y = quantized_matmul(inputs, self.kernel, self.activation_quantization)
        if self.use_bias:
            y = tf.nn.bias_add(y, tf.cast(self.bias, y.dtype))
        return self.activation(y) if self.activation is not None else y

    def get_config(self) -> Dict[str, Any]:
        return {**super().get_config(), "activation_quantization": aq_config(self.activation_quantization)}


class QuantLSTMCell(keras.layers.LSTMCell):
    """``keras.layers.LSTMCell`` whose kernel inputs ``x`` and recurrent-kernel inputs ``h`` are
    log-quantised before their matmuls; gates, cell state and output stay float (Keras' gate
    order i, f, c, o and formula). Without quantisation it is a plain LSTMCell.

    Args:
        units: state width.
        activation_quantization: None, an :class:`ActivationQuantization` or its dict.
        **kwargs: as ``keras.layers.LSTMCell`` (dropout is not supported with quantisation).

    Example:
        >>> rnn = keras.layers.RNN(QuantLSTMCell(64, {"bits": 4, "scale": 1.0}), return_sequences=True)
    """

    def __init__(self, units: int, activation_quantization=None, **kwargs) -> None:
        super().__init__(units, **kwargs)
        self.activation_quantization = ActivationQuantization.coerce(activation_quantization)
        if self.activation_quantization is not None and (self.dropout or self.recurrent_dropout):
            raise ValueError("QuantLSTMCell does not support dropout with activation quantisation")

    def call(self, inputs: tf.Tensor, states, training=None):
        q = self.activation_quantization
        if q is None:
            return super().call(inputs, states, training=training)
        h_prev, c_prev = states[0], states[1]
        z = quantized_matmul(inputs, self.kernel, q) + quantized_matmul(h_prev, self.recurrent_kernel, q)
        if self.use_bias:
            z = tf.nn.bias_add(z, tf.cast(self.bias, z.dtype))
        z_i, z_f, z_c, z_o = tf.split(z, 4, axis=-1)
        c = (self.recurrent_activation(z_f) * c_prev
             + self.recurrent_activation(z_i) * self.activation(z_c))
        h = self.recurrent_activation(z_o) * self.activation(c)
        return h, [h, c]

    def get_config(self) -> Dict[str, Any]:
        return {**super().get_config(), "activation_quantization": aq_config(self.activation_quantization)}


def lstm_layer(units: int, activation_quantization: Optional[ActivationQuantization],
               name: str) -> keras.layers.Layer:
    """A sequence LSTM (``return_sequences``): ``keras.layers.LSTM`` when nothing is quantised,
    else ``keras.layers.RNN`` over a :class:`QuantLSTMCell`. Both hold the cell as ``.cell``
    named ``lstm_cell``, so their checkpoints and variable names are interchangeable."""
    if activation_quantization is None:
        return keras.layers.LSTM(units, return_sequences=True, name=name)
    cell = QuantLSTMCell(units, activation_quantization, name="lstm_cell")
    return keras.layers.RNN(cell, return_sequences=True, name=name)
