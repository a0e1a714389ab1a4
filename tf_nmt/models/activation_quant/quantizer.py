"""The log quantiser of one tensor (fixed scale, straight-through gradient): the C++ op or the
same bits from stock TensorFlow ops."""
from __future__ import annotations

from tf_nmt import ops
from tf_nmt.compat import tf
from tf_nmt.models.activation_quant.config import FLOAT32_TINY, ActivationQuantization


def _log_unit_stock(u: tf.Tensor, bits: int) -> tf.Tensor:
    """``LogQuantizeDequantize(u, bits, mode="unscaled")`` with stock ops, bit for bit: the
    magnitude index from the float's bits (quant_codec.h ``LogCodec::MagIndex``), the centre
    ``2^-k`` built from exponent bits, subnormals/NaN to the smallest centre, Inf to the largest."""
    a = tf.abs(u)
    t = tf.where(a >= FLOAT32_TINY, a, tf.zeros_like(a))  # NaN compares false: 0 as in FlushTiny
    b = tf.bitcast(t, tf.int32)
    q = (tf.bitwise.right_shift(b, 23) - 127
         + tf.cast(tf.bitwise.bitwise_and(b, 0x7FFFFF) > 0x400000, tf.int32))
    k = tf.clip_by_value(-q, 0, (1 << (bits - 1)) - 1)
    mag = tf.bitcast(tf.bitwise.left_shift(127 - k, 23), tf.float32)  # 2^-k; 0 for k = 127
    return tf.where(u <= -FLOAT32_TINY, -mag, mag)


def fake_quantize(x: tf.Tensor, quant: ActivationQuantization, stock: bool = False) -> tf.Tensor:
    """``x`` replaced by its log-quantised value (same dtype), straight-through gradient.

    ``stock=False`` runs the C++ LogQuantizeDequantize op, ``stock=True`` stock TensorFlow ops;
    both give the same bits. The arithmetic is float32 whatever x's dtype.
    """
    dtype = x.dtype

    @tf.custom_gradient
    def quantize(value: tf.Tensor):
        u = tf.cast(value, tf.float32) * quant.inverse_scale
        unit = (_log_unit_stock(u, quant.bits) if stock
                else ops.log_quantize_dequantize(u, quant.bits, mode="unscaled"))
        return tf.cast(unit * quant.scale, dtype), lambda grad: grad

    return quantize(x)
