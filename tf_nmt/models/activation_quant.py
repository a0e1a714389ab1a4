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
from __future__ import annotations

import contextlib
import math
import threading
from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union

import numpy as np

from tf_nmt import ops
from tf_nmt.compat import keras, tf
from tf_nmt.config import ConfigError
from tf_nmt.ops import lowprec

_TINY = float(np.finfo(np.float32).tiny)


@dataclass(frozen=True)
class ActivationQuantization:
    """B-bit log quantisation of matmul inputs with the fixed scale ``scale``.

    Args:
        bits: bits per value, 1..8 (1 sign bit, ``bits - 1`` exponent bits).
        scale: the largest centre S (> 0, finite); centres are ``+-S * 2^-k``.

    Example:
        >>> q = ActivationQuantization(bits=4, scale=1.0)
        >>> fake_quantize(tf.constant([0.3, -2.0]), q).numpy()   # [0.25, -1.0]
    """

    bits: int = 4
    scale: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.bits, bool) or not isinstance(self.bits, int) or not 1 <= self.bits <= 8:
            raise ConfigError(f"train.quantize_activations_bits must be 0 (off) or an integer in "
                              f"1..8, got {self.bits!r}")
        if (isinstance(self.scale, bool) or not isinstance(self.scale, (int, float))
                or not math.isfinite(self.scale) or not _TINY <= float(self.scale) < 2.0 ** 126):
            raise ConfigError(f"train.quantize_activations_scale must be a finite float32 scale "
                              f"in [2^-126, 2^126), got {self.scale!r}")
        object.__setattr__(self, "scale", float(np.float32(self.scale)))

    @property
    def inverse_scale(self) -> float:
        """float32 ``1 / S`` (correctly rounded, as the C++ encoder computes it)."""
        return float(np.float32(1.0) / np.float32(self.scale))

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def coerce(cls, value: Union[None, "ActivationQuantization", Mapping[str, Any]]
               ) -> Optional["ActivationQuantization"]:
        """None, an instance, or its ``to_dict()`` (as stored in layer configs)."""
        if value is None or isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            return cls(**dict(value))
        raise TypeError(f"activation_quantization must be None, a dict or {cls.__name__}, "
                        f"got {type(value).__name__}")


def aq_config(quant: Optional[ActivationQuantization]) -> Optional[Dict[str, Any]]:
    """What a layer's ``get_config`` stores for its setting (None when off)."""
    return quant.to_dict() if quant is not None else None


def from_train_config(t: Any) -> Optional[ActivationQuantization]:
    """The setting a ``TrainConfig`` asks for (``quantize_activations_bits > 0``), else None;
    ConfigError for bad values (also checked when off, so a typo never waits for a later run)."""
    bits, scale = t.quantize_activations_bits, t.quantize_activations_scale
    if bits == 0:
        ActivationQuantization(bits=4, scale=scale)  # validates the scale
        return None
    return ActivationQuantization(bits=bits, scale=scale)


def _log_unit_stock(u: tf.Tensor, bits: int) -> tf.Tensor:
    """``LogQuantizeDequantize(u, bits, mode="unscaled")`` with stock ops, bit for bit: the
    magnitude index from the float's bits (quant_codec.h ``LogCodec::MagIndex``), the centre
    ``2^-k`` built from exponent bits, subnormals/NaN to the smallest centre, Inf to the largest."""
    a = tf.abs(u)
    t = tf.where(a >= _TINY, a, tf.zeros_like(a))  # NaN compares false: 0 as in FlushTiny
    b = tf.bitcast(t, tf.int32)
    q = (tf.bitwise.right_shift(b, 23) - 127
         + tf.cast(tf.bitwise.bitwise_and(b, 0x7FFFFF) > 0x400000, tf.int32))
    k = tf.clip_by_value(-q, 0, (1 << (bits - 1)) - 1)
    mag = tf.bitcast(tf.bitwise.left_shift(127 - k, 23), tf.float32)  # 2^-k; 0 for k = 127
    return tf.where(u <= -_TINY, -mag, mag)


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


class MatMulEngine:
    """How ``x[M, K] @ W`` runs for a quantised layer: the emulation with the C++ op (the default,
    used for training and evaluation). Subclasses swap the arithmetic at trace time."""

    name = "emulated"
    stock = False

    def matmul(self, x: tf.Tensor, w: tf.Variable, quant: ActivationQuantization,
               transpose_w: bool) -> tf.Tensor:
        q = fake_quantize(x, quant, stock=self.stock)
        return tf.matmul(q, tf.cast(w, q.dtype), transpose_b=transpose_w)


class StockOpsEngine(MatMulEngine):
    """The emulation with stock TensorFlow ops only (what an exported SavedModel runs)."""

    name = "emulated-stock"
    stock = True


class FloatEngine(MatMulEngine):
    """No activation quantisation: plain float32 matmuls (the speed baseline)."""

    name = "fp32"

    def matmul(self, x, w, quant, transpose_w):
        return tf.matmul(x, tf.cast(w, x.dtype), transpose_b=transpose_w)


class _PreparedWeights(MatMulEngine):
    """Base for engines that convert each weight matrix once (eagerly, on first trace) and keep
    the result as graph constants, so a matmul never re-encodes its weights."""

    def __init__(self) -> None:
        self._prepared: Dict[Any, Any] = {}

    def _prepare(self, w: np.ndarray) -> Any:
        raise NotImplementedError

    def prepared(self, w: tf.Variable, transpose_w: bool) -> Any:
        """The converted form of ``w`` as ``[N, K]`` (transpose_w) or ``[K, N]``, cached."""
        key = (w.ref() if hasattr(w, "ref") else id(w), transpose_w)
        if key not in self._prepared:
            with tf.init_scope():  # eager even while a tf.function is traced
                value = np.asarray(tf.convert_to_tensor(w, tf.float32).numpy(), np.float32)
                self._prepared[key] = self._prepare(value if transpose_w else value.T)
        return self._prepared[key]


class LowprecEngine(_PreparedWeights):
    """Matmuls in the log-space kernel (:func:`tf_nmt.ops.lowprec.matmul`, ``shift16``: base 2,
    the same codes as the emulation): activations are encoded per call with the fixed scale,
    weights once, to 4-bit codes ``[N, K]``. Weights re-trained on the 4-bit grid
    (``--quantize-bits 4``) are encoded exactly (their scale is their largest magnitude); others
    get the optimised log scale (a lossy quantisation, counted in ``off_grid``).

    Args:
        impl: "auto", "simd" or "scalar" (see :mod:`tf_nmt.ops.lowprec`).
    """

    name = "lowprec"
    variant = "shift16"

    def __init__(self, impl: str = "auto") -> None:
        super().__init__()
        self.impl = impl
        self.on_grid = 0
        self.off_grid = 0

    def _prepare(self, w_nk: np.ndarray) -> Tuple[tf.Tensor, float]:
        scale = float(np.max(np.abs(w_nk))) if w_nk.size else 0.0
        codes = ops.log_encode(w_nk, scale, 4)
        if np.array_equal(ops.log_decode(codes, scale, 4).numpy(), w_nk):
            self.on_grid += 1
        else:
            self.off_grid += 1
            scale = float(ops.log_fit_scale(w_nk, 4, "optimised").numpy())
            codes = ops.log_encode(w_nk, scale, 4)
        return tf.constant(codes.numpy()), scale

    def matmul(self, x, w, quant, transpose_w):
        if quant.bits != 4:
            raise ConfigError(f"the log-space kernels need 4-bit activations, this model "
                              f"quantises them to {quant.bits} bits")
        codes, w_scale = self.prepared(w, transpose_w)
        x_codes = lowprec.encode(tf.cast(x, tf.float32), quant.scale, self.variant)
        y = lowprec.matmul(x_codes, codes, quant.scale, w_scale, self.variant, "nk", self.impl)
        return tf.cast(y, x.dtype)


class Int8Engine(_PreparedWeights):
    """Matmuls as TensorFlow's stock 8-bit GEMM (``QuantizedMatMul``, quint8 x quint8 -> qint32):
    weights mapped linearly onto 256 levels over ``[-max|w|, max|w|]`` once, activations per call
    over ``[-S, S]`` (S the fixed activation scale; larger values clip, as in the log scheme)."""

    name = "int8"

    def _prepare(self, w_nk: np.ndarray) -> Tuple[tf.Tensor, float]:
        m = max(float(np.max(np.abs(w_nk))) if w_nk.size else 0.0, 1e-30)
        q = tf.quantization.quantize(tf.constant(w_nk.T), -m, m, tf.quint8, mode="MIN_FIRST")
        # kept as uint8: quantized dtypes cannot cross a while loop (no NextIteration kernel)
        return tf.bitcast(q.output, tf.uint8), m

    def matmul(self, x, w, quant, transpose_w):
        w_q, m = self.prepared(w, transpose_w)
        s = quant.scale
        x_q = tf.quantization.quantize(tf.clip_by_value(tf.cast(x, tf.float32), -s, s), -s, s,
                                       tf.quint8, mode="MIN_FIRST")
        acc, lo, hi = tf.raw_ops.QuantizedMatMul(a=x_q.output, b=tf.bitcast(w_q, tf.quint8),
                                                 min_a=x_q.output_min,
                                                 max_a=x_q.output_max, min_b=-m, max_b=m,
                                                 Toutput=tf.qint32)
        return tf.cast(tf.quantization.dequantize(acc, lo, hi, mode="MIN_FIRST"), x.dtype)


class _Recorder(MatMulEngine):
    """Emulation that also keeps a sample of every matmul input's magnitudes (eager only)."""

    name = "calibration"

    def __init__(self, per_call: int, seed: int) -> None:
        self.per_call, self.samples = per_call, []
        self.rng = np.random.default_rng(seed)

    def matmul(self, x, w, quant, transpose_w):
        values = np.abs(np.asarray(x.numpy(), np.float32).ravel())
        if values.size > self.per_call:
            values = self.rng.choice(values, self.per_call, replace=False)
        self.samples.append(values)
        return super().matmul(x, w, quant, transpose_w)


ENGINES = {"emulated": MatMulEngine, "emulated-stock": StockOpsEngine, "fp32": FloatEngine,
           "lowprec": LowprecEngine, "int8": Int8Engine}

_state = threading.local()


def current_engine() -> MatMulEngine:
    """The engine of the innermost :func:`use_engine` on this thread (default: the emulation)."""
    stack = getattr(_state, "stack", None)
    return stack[-1] if stack else _DEFAULT


@contextlib.contextmanager
def use_engine(engine: Union[str, MatMulEngine]) -> Iterator[MatMulEngine]:
    """Run (and trace) quantised layers with ``engine`` (an instance or an ``ENGINES`` name).
    Read when a function is traced: a ``tf.function`` traced earlier keeps its engine."""
    if isinstance(engine, str):
        if engine not in ENGINES:
            raise ConfigError(f"unknown matmul engine {engine!r}; valid: {sorted(ENGINES)}")
        engine = ENGINES[engine]()
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = []
    stack.append(engine)
    try:
        yield engine
    finally:
        stack.pop()


_DEFAULT = MatMulEngine()


def inference_engine(model: keras.Model, name: str) -> MatMulEngine:
    """A new engine ``name`` for translating with ``model``; ConfigError when ``"lowprec"`` or
    ``"int8"`` is asked of a model that was not trained with quantised (4-bit, for lowprec)
    matmul inputs: both need its fixed activation scale."""
    if name not in ENGINES:
        raise ConfigError(f"unknown matmul engine {name!r}; valid: {sorted(ENGINES)}")
    quant = getattr(model, "activation_quantization", None)
    if name in ("lowprec", "int8") and (quant is None or (name == "lowprec" and quant.bits != 4)):
        raise ConfigError(f"{name} inference needs a run trained with "
                          "train.quantize_activations_bits=4 (and --quantize-bits 4 weights); "
                          f"this one has {'no activation quantisation' if quant is None else quant}")
    return ENGINES[name]()


def quantized_matmul(x: tf.Tensor, w: tf.Variable, quant: Optional[ActivationQuantization],
                     transpose_w: bool = False) -> tf.Tensor:
    """``x[..., K] @ W`` (``W [K, N]``, or ``[N, K]`` with ``transpose_w``) with x log-quantised
    when ``quant`` is set, run by :func:`current_engine`; returns ``[..., N]``."""
    flat = tf.reshape(x, [-1, tf.shape(x)[-1]])
    if quant is None:
        y = tf.matmul(flat, tf.cast(w, x.dtype), transpose_b=transpose_w)
    else:
        y = current_engine().matmul(flat, w, quant, transpose_w)
    return tf.reshape(y, tf.concat([tf.shape(x)[:-1], tf.shape(y)[-1:]], axis=0))


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


def calibrate_scale(model: keras.Model, batches: Iterable[Dict[str, tf.Tensor]], bits: int = 4,
                    per_call: int = 4096, seed: int = 0) -> float:
    """The optimised log scale (:func:`tf_nmt.ops.log_fit_scale`) of a sample of every matmul
    input ``model`` sees on ``batches`` (teacher-forced, eager). ``model`` must be built with
    activation quantisation (any scale: the recorded inputs precede the quantiser, though later
    layers see quantised inputs). The result is meant to be frozen into the config."""
    recorder = _Recorder(per_call, seed)
    with use_engine(recorder):
        for batch in batches:
            model(batch, training=False)
    if not recorder.samples:
        raise ConfigError("calibration saw no quantised matmul input: build the model with "
                          "activation quantisation and give it at least one batch")
    values: List[np.ndarray] = recorder.samples
    return float(ops.log_fit_scale(np.concatenate(values), bits, "optimised").numpy())
