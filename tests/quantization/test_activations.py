"""Log-quantised matmul inputs (tf_nmt.models.activation_quant): the stock-op quantiser is the C++
op bit for bit, the gradient is straight-through, the quantised layers are their float
counterparts on quantised inputs, the engines agree, and bad settings are ConfigErrors."""
import numpy as np
import pytest

from tf_nmt import ops
from tf_nmt.compat import keras, tf
from tf_nmt.config import ConfigError, load_config
from tf_nmt.models import activation_quant as A
from tf_nmt.run_dir import build_initialised_model

pytestmark = pytest.mark.skipif(not ops.ops_available(), reason="custom op library not built")

Q4 = A.ActivationQuantization(bits=4, scale=1.0)
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-39, 1.17549435e-38,
                     -1.17549435e-38, 3.4e38, -3.4e38, 0.75, 0.7500001, 0.7499999, -0.75, 1.5,
                     2.0 ** -7, 0.75 * 2.0 ** -7, 2.0 ** -8, 1.0, -1.0], np.float32)


def _values(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    spread = (rng.standard_normal(20000) * np.exp2(rng.uniform(-40, 40, 20000))).astype(np.float32)
    return np.concatenate([SPECIALS, spread, rng.standard_normal(5000).astype(np.float32)])


@pytest.mark.parametrize("bits", range(1, 9))
@pytest.mark.parametrize("scale", [1.0, 0.37, 3.5e5, 2.0 ** -100, 7.0])
def test_stock_quantiser_is_the_op_bit_for_bit(bits, scale):
    q = A.ActivationQuantization(bits=bits, scale=scale)
    x = tf.constant(_values(bits))
    op = A.fake_quantize(x, q).numpy()
    stock = A.fake_quantize(x, q, stock=True).numpy()
    np.testing.assert_array_equal(op.view(np.uint32), stock.view(np.uint32))
    assert np.all(np.isfinite(op))


def test_centres_clipping_and_ties():
    q = A.ActivationQuantization(bits=4, scale=2.0)
    x = tf.constant([0.3, -5.0, 0.0, 1.5, 1.49, 0.75, -0.01, 2.0 ** -10], tf.float32)
    # centres +-2 * 2^-k, k in 0..7; 1.5 = 0.75 * 2 ties to the smaller centre 1; no zero level
    expected = [0.25, -2.0, 2.0 ** -6, 1.0, 1.0, 0.5, -2.0 ** -6, 2.0 ** -6]
    for stock in (False, True):
        np.testing.assert_array_equal(A.fake_quantize(x, q, stock=stock).numpy(), expected)
    # same codes as the lowprec encoder (shift16 is LogQuantizeEncode at 4 bits)
    from tf_nmt.ops import lowprec
    codes = lowprec.encode(x, 2.0, "shift16")
    np.testing.assert_array_equal(lowprec.decode(codes, 2.0, "shift16").numpy(), expected)


def test_bfloat16_inputs_keep_their_dtype():
    x = tf.constant([0.3, -0.6], tf.bfloat16)
    y = A.fake_quantize(x, Q4)
    assert y.dtype == tf.bfloat16
    np.testing.assert_array_equal(tf.cast(y, tf.float32).numpy(), [0.25, -0.5])


@pytest.mark.parametrize("scale", [1.0, 0.3])  # 0.3: 1/S is inexact, the gradient still is
def test_gradient_is_straight_through(scale):
    q = A.ActivationQuantization(bits=4, scale=scale)
    x = tf.constant(np.random.default_rng(1).standard_normal([3, 5]).astype(np.float32))
    upstream = tf.constant(np.random.default_rng(2).standard_normal([3, 5]).astype(np.float32))
    for stock in (False, True):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = A.fake_quantize(x, q, stock=stock)
        np.testing.assert_array_equal(tape.gradient(y, x, upstream).numpy(), upstream.numpy())


def test_gradient_through_quantised_matmul_input_equals_unquantised():
    x = tf.constant(np.random.default_rng(3).standard_normal([2, 4, 6]).astype(np.float32))
    plain = keras.layers.Dense(5)
    quant = A.QuantDense(5, {"bits": 4, "scale": 1.0})
    plain.build(x.shape)
    quant.build(x.shape)
    quant.set_weights(plain.get_weights())
    c = tf.constant(np.random.default_rng(4).standard_normal([2, 4, 5]).astype(np.float32))
    grads = []
    for layer in (plain, quant):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x) * c)  # linear in y: dL/dy = c for both layers
        grads.append(tape.gradient(loss, x).numpy())
    np.testing.assert_array_equal(grads[0], grads[1])
    assert np.any(grads[0] != 0)
    # the forward pass did change: the layer saw the quantised input
    expected = plain(A.fake_quantize(x, A.ActivationQuantization(4, 1.0)))
    np.testing.assert_allclose(quant(x).numpy(), expected.numpy(), rtol=1e-6, atol=1e-6)
    assert not np.allclose(quant(x).numpy(), plain(x).numpy(), atol=1e-3)


def test_quant_lstm_cell_is_lstm_cell_on_quantised_inputs():
    rng = np.random.default_rng(5)
    x = tf.constant(rng.standard_normal([3, 7]).astype(np.float32))
    h = tf.constant(np.tanh(rng.standard_normal([3, 8])).astype(np.float32))
    c = tf.constant(rng.standard_normal([3, 8]).astype(np.float32))
    ref = keras.layers.LSTMCell(8)
    ref.build(x.shape)
    for quant in (None, A.ActivationQuantization(4, 0.5)):
        cell = A.QuantLSTMCell(8, quant)
        cell.build(x.shape)
        cell.set_weights(ref.get_weights())
        got, (got_h, got_c) = cell(x, [h, c])
        qx = A.fake_quantize(x, quant) if quant else x
        qh = A.fake_quantize(h, quant) if quant else h
        want, (_, want_c) = ref(qx, [qh, c])
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_c.numpy(), want_c.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got.numpy(), got_h.numpy())


def test_layer_configs_round_trip():
    layer = A.QuantDense(3, {"bits": 3, "scale": 0.5}, activation="relu")
    again = A.QuantDense.from_config(layer.get_config())
    assert again.activation_quantization == A.ActivationQuantization(3, 0.5)
    cell = A.QuantLSTMCell.from_config(A.QuantLSTMCell(4, Q4).get_config())
    assert cell.activation_quantization == Q4
    assert A.QuantDense.from_config(A.QuantDense(2).get_config()).activation_quantization is None


HP = {"transformer": dict(num_layers=1, d_model=16, num_heads=2, ff_dim=32, dropout=0.0),
      "gnmt": dict(num_layers=3, units=16, dropout=0.0, attention="bahdanau")}
BATCH = {"source": tf.constant([[5, 6, 7, 3, 0], [9, 10, 3, 0, 0]]),
         "target_in": tf.constant([[2, 8, 9, 10], [2, 11, 12, 0]])}


@pytest.mark.parametrize("kind", ["transformer", "gnmt"])
def test_models_quantise_every_matmul_input_and_keep_variable_names(kind):
    plain = build_initialised_model(kind, 20, HP[kind])
    quant = build_initialised_model(kind, 20, HP[kind], activation_quantization=Q4)
    assert [v.name for v in plain.weights] == [v.name for v in quant.weights]
    assert quant.get_config()["activation_quantization"] == Q4.to_dict()
    quant.set_weights(plain.get_weights())
    with A.use_engine("fp32"):  # quantisation off: the float model exactly
        np.testing.assert_array_equal(quant(BATCH).numpy(), plain(BATCH).numpy())
    calls = []

    class Counting(A.MatMulEngine):
        def matmul(self, x, w, quant, transpose_w):
            calls.append(tuple(w.shape))
            return super().matmul(x, w, quant, transpose_w)

    with A.use_engine(Counting()):
        emulated = quant(BATCH).numpy()
    kernels = {tuple(v.shape) for v in quant.trainable_weights if len(v.shape) == 2}
    assert set(calls) == kernels  # every weight matrix (incl. the output projection) is fed quantised
    assert not np.allclose(emulated, plain(BATCH).numpy(), atol=1e-3)
    np.testing.assert_array_equal(quant(BATCH).numpy(), emulated)  # default engine = emulation


def _on_grid(model):
    """Put every matrix on its 4-bit log grid, as --quantize-bits 4 re-training leaves it."""
    for v in model.trainable_weights:
        if len(v.shape) == 2:
            codes, scale = ops.log_quantize(v, 4)
            v.assign(ops.log_decode(codes, scale, 4))


@pytest.mark.parametrize("kind", ["transformer", "gnmt"])
def test_lowprec_and_int8_engines_follow_the_emulation(kind):
    model = build_initialised_model(kind, 20, HP[kind], activation_quantization=Q4)
    _on_grid(model)
    emulated = model(BATCH).numpy()
    engine = A.LowprecEngine(impl="scalar")
    with A.use_engine(engine):
        low = model(BATCH).numpy()
    assert engine.on_grid > 0 and engine.off_grid == 0
    # same products, exact integer sums instead of float32 ones
    np.testing.assert_allclose(low, emulated, rtol=1e-4, atol=1e-4)
    with A.use_engine("lowprec"):
        np.testing.assert_array_equal(model(BATCH).numpy(), low)  # SIMD = scalar integers
    with A.use_engine("int8"):
        assert np.all(np.isfinite(model(BATCH).numpy()))


def test_int8_engine_is_an_8_bit_matmul_with_clipped_activations():
    rng = np.random.default_rng(7)
    x = tf.constant(rng.uniform(-3, 3, [6, 64]).astype(np.float32))
    w = tf.Variable(rng.standard_normal([64, 10]).astype(np.float32))
    q = A.ActivationQuantization(4, 2.0)
    got = A.Int8Engine().matmul(x, w, q, transpose_w=False).numpy()
    want = np.clip(x.numpy(), -2, 2) @ w.numpy()
    np.testing.assert_allclose(got, want, atol=0.02 * np.max(np.abs(want)))
    got_t = A.Int8Engine().matmul(x, tf.Variable(tf.transpose(w)), q, transpose_w=True).numpy()
    np.testing.assert_allclose(got_t, want, atol=0.02 * np.max(np.abs(want)))


def test_lowprec_engine_encodes_weights_once_and_counts_off_grid_ones():
    layer = A.QuantDense(4, Q4, use_bias=False)
    x = tf.constant(np.random.default_rng(6).standard_normal([3, 8]).astype(np.float32))
    layer.build(x.shape)
    engine = A.LowprecEngine()
    fn = tf.function(lambda t: layer(t))
    with A.use_engine(engine):
        y1 = fn(x)
        y2 = fn(x + 1.0)
    assert engine.off_grid == 1 and len(engine._prepared) == 1
    assert y1.shape == (3, 4) and not np.array_equal(y1.numpy(), y2.numpy())


def test_lowprec_needs_four_bit_activations():
    layer = A.QuantDense(4, {"bits": 3, "scale": 1.0})
    with A.use_engine("lowprec"), pytest.raises(ConfigError, match="4-bit"):
        layer(tf.ones([1, 4]))


def test_calibrated_scale_fits_the_recorded_inputs():
    model = build_initialised_model("gnmt", 20, HP["gnmt"], activation_quantization=Q4)
    scale = A.calibrate_scale(model, [BATCH])
    assert 0.01 < scale < 100.0
    with pytest.raises(ConfigError, match="no quantised matmul input"):
        A.calibrate_scale(build_initialised_model("gnmt", 20, HP["gnmt"]), [BATCH])


@pytest.mark.parametrize("override, match", [
    ("train.quantize_activations_bits=9", "quantize_activations_bits"),
    ("train.quantize_activations_bits=-1", "quantize_activations_bits"),
    ("train.quantize_activations_scale=0", "quantize_activations_scale"),
    ("train.quantize_activations_scale=-2", "quantize_activations_scale"),
    ("train.quantize_activations_scale=.inf", "quantize_activations_scale"),
    ("train.quantize_activations_scale=.nan", "quantize_activations_scale"),
    ("train.quantize_activations_scale=1e39", "quantize_activations_scale"),
    ("train.quantize_activations_bits=2.5", "quantize_activations_bits"),
    ("train.quantize_activations_scale=big", "quantize_activations_scale"),
])
def test_bad_settings_are_config_errors(override, match):
    from tf_nmt.training.trainer import validate_config

    with pytest.raises(ConfigError, match=match):
        validate_config(load_config(None, [override]))


def test_settings_are_read_from_the_train_config():
    cfg = load_config(None, ["train.quantize_activations_bits=4",
                             "train.quantize_activations_scale=2.5"])
    assert A.from_train_config(cfg.train) == A.ActivationQuantization(4, 2.5)
    assert A.from_train_config(load_config(None, []).train) is None
    with pytest.raises(ConfigError, match="unknown matmul engine"):
        with A.use_engine("fp16"):
            pass
