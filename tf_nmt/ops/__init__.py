"""Custom TensorFlow ops (C++): gradient dropping, log/fixed quantisation, LR schedule, and the
fused label-smoothed cross-entropy of the training loss (:mod:`tf_nmt.ops.xent`).

The compiled library is loaded on first use (see :mod:`tf_nmt.ops.loader`); when it is missing
the first op call raises ImportError with build instructions.
"""
from tf_nmt.ops import _gradients
from tf_nmt.ops.loader import load_ops, ops_available

_gradients.register()

from tf_nmt.ops.grad_drop import (  # noqa: E402
    densify, grad_drop, grad_drop_global, grad_drop_one_bit, num_columns, one_bit_quantize)
from tf_nmt.ops.log_quant import (  # noqa: E402
    FIXED, LOG, Quantizer, log_decode, log_encode, log_fit_scale, log_quantize,
    log_quantize_dequantize, pack_nibbles, unpack_nibbles)
from tf_nmt.ops.lr_schedule import nmt_learning_rate  # noqa: E402

__all__ = [
    "load_ops", "ops_available", "densify", "grad_drop", "grad_drop_global", "grad_drop_one_bit",
    "num_columns", "one_bit_quantize", "FIXED", "LOG", "Quantizer", "log_decode", "log_encode",
    "log_fit_scale", "log_quantize", "log_quantize_dequantize", "pack_nibbles", "unpack_nibbles",
    "nmt_learning_rate",
]
