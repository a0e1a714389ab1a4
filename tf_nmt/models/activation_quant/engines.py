"""How a quantised layer's ``x @ W`` runs (:data:`ENGINES`: the emulation with the C++ op, its
stock-op twin for export, the log-space kernels, int8, plain float32), which engine is active
(:func:`use_engine`, read at trace time), and :func:`quantized_matmul`, the one place layers call."""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Dict, Iterator, Optional, Tuple, Union

import numpy as np

from tf_nmt import ops
from tf_nmt.compat import keras, tf
from tf_nmt.config import ConfigError
from tf_nmt.models.activation_quant.config import ActivationQuantization
from tf_nmt.models.activation_quant.quantizer import fake_quantize
from tf_nmt.ops import lowprec


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
