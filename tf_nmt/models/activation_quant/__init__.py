"""Log-quantised matmul inputs with a fixed scale (thesis section 7.3.5, Table 7.4), and the one
place where a model's ``x @ W`` is computed when they are on.

With ``train.quantize_activations_bits = B`` every activation that enters a matrix multiplication
with a weight matrix (Dense layers, the attention q/k/v/out projections, both LSTM kernels' inputs
``x`` and ``h``, the output projection) is replaced on the fly by its B-bit log-quantised value
``+-S * 2^-k`` (``k in [0, 2^(B-1))``, no zero level) for a **fixed** scale ``S``
(``train.quantize_activations_scale``): fitting a scale before every product would cost more than
the product at inference time. Non-linear intermediates (softmax, tanh, sigmoid, ReLU) and the
activation-by-activation products inside attention (``q k^T``, ``weights v``) are not quantised.
The step function has zero derivative, so training uses a straight-through estimator: the
gradient with respect to the un-quantised input is the incoming gradient, unchanged.

The quantiser is ``y = S * LogQuantizeDequantize(x * (1/S), mode="unscaled")``, the C++ op of
:mod:`tf_nmt.ops.log_quant` with its scale fixed to 1; :func:`fake_quantize` with ``stock=True``
computes the same bits with stock TensorFlow ops (exponent arithmetic on the float's bits), so an
exported SavedModel needs no custom-op library. Layers read *how* their matmul runs from the
engine active when they are traced (:func:`use_engine`): the emulation with the op (default), the
stock-op emulation (export), the log-space kernels of :mod:`tf_nmt.ops.lowprec` on pre-encoded
weight codes (``--lowprec``), an int8 path, or plain float32 (no quantisation, the speed baseline).

Choosing S: a fixed constant (1.0 suits LSTM states in (-1, 1) and layer-normalised inputs, whose
bulk lies within a few units), or :func:`calibrate_scale`, which records a model's matmul inputs
on a few batches and fits the optimised log scale to them once; the value is then written into
the config and frozen for training, evaluation and serving.
"""
from tf_nmt.models.activation_quant.calibration import calibrate_scale
from tf_nmt.models.activation_quant.config import (ActivationQuantization, aq_config,
                                                   from_train_config)
from tf_nmt.models.activation_quant.engines import (ENGINES, FloatEngine, Int8Engine,
                                                    LowprecEngine, MatMulEngine, StockOpsEngine,
                                                    current_engine, inference_engine,
                                                    quantized_matmul, use_engine)
from tf_nmt.models.activation_quant.layers import QuantDense, QuantLSTMCell, lstm_layer
from tf_nmt.models.activation_quant.quantizer import fake_quantize

__all__ = ["ActivationQuantization", "aq_config", "from_train_config", "fake_quantize",
           "MatMulEngine", "StockOpsEngine", "FloatEngine", "LowprecEngine", "Int8Engine",
           "ENGINES", "current_engine", "use_engine", "inference_engine", "quantized_matmul",
           "QuantDense", "QuantLSTMCell", "lstm_layer", "calibrate_scale"]
