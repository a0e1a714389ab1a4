"""The C++ seeded dropout op against a NumPy reference, its vector loops (every width this CPU
has) and scalar loop against each other, its gradient, its errors, and the Keras layer / kernel
choice built on it."""
import numpy as np
import pytest

from tf_nmt.compat import keras, tf
from tf_nmt.config import ConfigError
from tf_nmt.models import kernels
from tf_nmt.models.dropout import (CountedDropout, SeededDropout, make_dropout,
                                   resolve_dropout_kernel, use_kernel)
from tf_nmt.ops import dropout, ops_available
from tf_nmt.ops import isa as simd
from tf_nmt.ops.dropout import ISA_ENV, seeded_dropout
from tests.ops.widths import require

pytestmark = pytest.mark.skipif(not ops_available(), reason="custom-op library not built")

GAMMA, MIX1, MIX2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def reference_keep(seed: int, n: int, rate: float) -> np.ndarray:
    """keep[i] = top 32 bits of SplitMix64(seed + (i + 1) * gamma) >= rate * 2^32."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed % 2 ** 64) + (np.arange(1, n + 1, dtype=np.uint64) * GAMMA)
        z = (z ^ (z >> np.uint64(30))) * MIX1
        z = (z ^ (z >> np.uint64(27))) * MIX2
        z ^= z >> np.uint64(31)
    return (z >> np.uint64(32)) >= np.uint64(int(float(np.float32(rate)) * 4294967296.0))


def run(x, rate, seed):
    return seeded_dropout(tf.constant(x), rate, tf.constant(seed, tf.int64)).numpy()


@pytest.mark.parametrize("isa", simd.ISAS)
@pytest.mark.parametrize("n", [1, 7, 8, 9, 15, 16, 17, 8191, 8192, 8193, 100_003])
@pytest.mark.parametrize("rate", [0.0, 0.1, 0.5])
def test_float32_matches_reference_bit_for_bit(n, rate, isa, monkeypatch):
    require(isa)
    monkeypatch.setenv(ISA_ENV, isa)
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    seed = 123456789 + n
    keep = reference_keep(seed, n, rate)
    scale = np.float32(1.0) / (np.float32(1.0) - np.float32(rate))
    want = np.where(keep, x * scale, np.float32(0.0)).astype(np.float32)
    got = run(x, rate, seed)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("isa", simd.ISAS[1:])
def test_scalar_loop_equals_vector_loop(monkeypatch, isa):
    require(isa)
    x = np.random.default_rng(0).standard_normal((37, 1031)).astype(np.float32)
    x[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    monkeypatch.setenv(ISA_ENV, isa)
    vector = run(x, 0.3, -42)
    monkeypatch.setenv(ISA_ENV, "scalar")
    scalar = run(x, 0.3, -42)
    np.testing.assert_array_equal(vector.view(np.uint32), scalar.view(np.uint32))


@pytest.mark.parametrize("isa", simd.ISAS[1:])
@pytest.mark.parametrize("n", [7, 15, 16, 17, 8193, 40_011])
def test_bfloat16_scalar_loop_equals_vector_loop(monkeypatch, n, isa):
    """The bfloat16 vector loops round as Eigen does: ties to even, NaN to a signed quiet NaN,
    overflow to inf, subnormals kept; a partial last vector is handled too."""
    require(isa)
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-140, 120, n))).astype(np.float32)
    special = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 3.3e38, -3.3e38, 1e-40, -1e-40,
                        1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 0.75], np.float32)
    x[:special.size] = special[:n]
    bits = tf.cast(x, tf.bfloat16)
    # signalling and payload-carrying NaNs, as raw bfloat16 bits
    raw = tf.bitcast(bits, tf.uint16).numpy()
    raw[-3:] = [0x7F81, 0xFF81, 0x7FFF][-min(3, n):]
    bits = tf.bitcast(tf.constant(raw), tf.bfloat16)
    seed = tf.constant(n * 7919, tf.int64)
    monkeypatch.setenv(ISA_ENV, isa)
    vector = seeded_dropout(bits, 0.2, seed)
    monkeypatch.setenv(ISA_ENV, "scalar")
    scalar = seeded_dropout(bits, 0.2, seed)
    np.testing.assert_array_equal(tf.bitcast(vector, tf.uint16).numpy(),
                                  tf.bitcast(scalar, tf.uint16).numpy())
    if n >= 1000:  # rate 0.2: the mask is not all-drop or all-keep
        kept = np.mean(tf.bitcast(vector, tf.uint16).numpy()[special.size:] != 0)
        assert 0.75 < kept < 0.85


@pytest.mark.parametrize("dtype", [tf.bfloat16, tf.float16])
def test_16_bit_types_use_the_same_mask(dtype):
    x = np.random.default_rng(1).standard_normal(5000).astype(np.float32)
    got = seeded_dropout(tf.cast(x, dtype), 0.25, tf.constant(9, tf.int64))
    assert got.dtype == dtype
    keep = reference_keep(9, x.size, 0.25)
    want = tf.cast(tf.cast(tf.cast(x, dtype), tf.float32) * (1 / 0.75), dtype).numpy()
    np.testing.assert_array_equal(tf.cast(got, tf.float32).numpy(),
                                  np.where(keep, tf.cast(want, tf.float32).numpy(), 0.0))


def test_keep_fraction_and_seeds():
    n, rate = 1_000_000, 0.1
    ones = np.ones(n, np.float32)
    a, b = run(ones, rate, 1), run(ones, rate, 2)
    kept = np.mean(a != 0)
    assert abs(kept - (1 - rate)) < 5 * np.sqrt(rate * (1 - rate) / n)
    np.testing.assert_allclose(a[a != 0], 1 / np.float32(0.9))
    assert np.array_equal(a, run(ones, rate, 1))  # same seed, same mask
    agree = np.mean((a != 0) == (b != 0))  # independent masks agree on 0.9^2 + 0.1^2 = 0.82
    assert abs(agree - 0.82) < 0.005


def test_gradient_is_the_same_mask_times_scale():
    x = tf.constant(np.random.default_rng(2).standard_normal((64, 33)).astype(np.float32))
    up = tf.constant(np.random.default_rng(3).standard_normal((64, 33)).astype(np.float32))
    seed = tf.constant(77, tf.int64)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = seeded_dropout(x, 0.2, seed)
    grad = tape.gradient(y, x, output_gradients=up).numpy()
    keep = reference_keep(77, x.shape.num_elements(), 0.2).reshape(x.shape)
    np.testing.assert_array_equal(grad, np.where(keep, up.numpy() * np.float32(1 / np.float32(0.8)), 0))


@pytest.mark.parametrize("rate", [1.0, -0.1, 1.5])
def test_bad_rate_is_refused(rate):
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match="rate"):
        run(np.ones(4, np.float32), rate, 1)


def test_isa_cap(monkeypatch):
    """The kernel takes the CPU's widest loops, at most $TF_NMT_DROPOUT_ISA; an unknown cap is
    refused by the Python side and by the op, not silently ignored."""
    monkeypatch.delenv(ISA_ENV, raising=False)
    assert dropout.isa() == simd.cpu_isa()
    monkeypatch.setenv(ISA_ENV, "scalar")
    assert dropout.isa() == "scalar"
    monkeypatch.setenv(ISA_ENV, "sse9")
    with pytest.raises(ValueError, match=ISA_ENV):
        dropout.isa()
    with pytest.raises(tf.errors.InvalidArgumentError, match=ISA_ENV):
        run(np.ones(4, np.float32), 0.1, 1)


def test_non_scalar_seed_is_refused():
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):
        seeded_dropout(tf.ones([4]), 0.1, tf.constant([1, 2], tf.int64))


def test_layer_is_identity_outside_training_and_drops_in_training():
    layer = SeededDropout(0.5)
    x = tf.ones([8, 128])
    np.testing.assert_array_equal(layer(x, training=False).numpy(), x.numpy())
    y = layer(x, training=True).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and 0.3 < np.mean(y == 0) < 0.7
    assert not np.array_equal(y, layer(x, training=True).numpy())  # a new seed per call
    clone = SeededDropout.from_config(layer.get_config())
    assert clone.rate == 0.5
    with pytest.raises(ValueError, match="noise_shape"):
        SeededDropout(0.1, noise_shape=[1, 128])


def test_layer_in_a_compiled_function_trains():
    layer = SeededDropout(0.1)
    w = tf.Variable(tf.ones([16]))

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(layer(w[None, :] * 3.0, training=True))
        return tape.gradient(loss, w)

    g = step().numpy()
    kept = np.isclose(g, 3.0 / 0.9, rtol=1e-6)
    assert kept.any() and np.all(kept | (g == 0))


def test_kernel_choice():
    with pytest.raises(ConfigError, match="dropout_kernel"):
        resolve_dropout_kernel("fast")
    with pytest.raises(ConfigError, match="XLA"):
        resolve_dropout_kernel("fused", jit_compile=True)
    assert resolve_dropout_kernel("auto", jit_compile=True) == "tf"
    assert resolve_dropout_kernel("tf") == "tf"
    assert resolve_dropout_kernel("fused") == "fused"
    with pytest.raises(ValueError):
        with use_kernel("auto"):
            pass
    assert make_dropout(0.0) is None
    with use_kernel("fused"):
        assert type(make_dropout(0.1)) is SeededDropout
    tf_layer = make_dropout(0.1)     # Keras's dropout, whose seeds training counts (CountedDropout)
    assert type(tf_layer) is CountedDropout and isinstance(tf_layer, keras.layers.Dropout)
    assert kernels.current("dropout") == "tf"


def _small_model(kind: str):
    from tf_nmt.models import build_model

    hp = ({"num_layers": 1, "d_model": 16, "num_heads": 2, "ff_dim": 32, "attention_dropout": 0.1}
          if kind == "transformer" else {"num_layers": 2, "units": 16})
    model = build_model(kind, 40, dropout=0.2, **hp)
    ids = tf.constant([[3, 4, 5, 2]])
    model({"source": ids, "target_in": ids}, training=False)
    return model


@pytest.mark.parametrize("kind", ["transformer", "gnmt"])
def test_checkpoints_move_between_kernels(kind, tmp_path):
    """A run saved with Keras's dropout resumes with the fused one (and back): same objects."""
    keras.utils.set_random_seed(0)
    plain = _small_model(kind)
    with use_kernel("fused"):
        fused = _small_model(kind)
    kinds = {type(layer) for layer in fused._flatten_layers() if isinstance(layer, keras.layers.Dropout)}
    assert kinds == {SeededDropout}
    path = tf.train.Checkpoint(model=plain).write(str(tmp_path / "ckpt"))
    tf.train.Checkpoint(model=fused).read(path).assert_consumed()
    for a, b in zip(plain.weights, fused.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    ids = tf.constant([[3, 4, 5, 2]])
    out = fused({"source": ids, "target_in": ids}, training=True)
    assert bool(tf.reduce_all(tf.math.is_finite(out)))
