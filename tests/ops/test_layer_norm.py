"""The C++ fused layer norm against a NumPy reference (float64), every row-loop width the CPU runs
(AVX-512, AVX2, scalar), its gradient, its errors, and the Keras layer / kernel choice built on
it."""
import numpy as np
import pytest

from tf_nmt.compat import keras, tf
from tf_nmt.config import ConfigError
from tf_nmt.models import kernels
from tf_nmt.models.kernels import use_kernels
from tf_nmt.models.layer_norm import FusedLayerNormalization, make_layer_norm, resolve_norm_kernel
from tf_nmt.ops import load_ops, ops_available
from tf_nmt.ops import isa as simd
from tf_nmt.ops.layer_norm import ISA_ENV, fused_layer_norm
from tests.ops.widths import require

pytestmark = pytest.mark.skipif(not ops_available(), reason="custom-op library not built")

EPS = 1e-6
SHAPES = [(3, 256), (2, 5, 256), (4, 37), (1, 16), (7, 300), (11,)]  # full, tails, rank 1


def reference(x, gamma, beta, dy, eps=EPS):
    """Layer norm over the last axis and its gradients, in float64."""
    x, gamma, beta, dy = (np.asarray(a, np.float64) for a in (x, gamma, beta, dy))
    mean = x.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)
    xhat = (x - mean) * rstd
    g = dy * gamma
    dx = rstd * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True))
    axes = tuple(range(x.ndim - 1))
    return xhat * gamma + beta, dx, (dy * xhat).sum(axes), dy.sum(axes)


def fused(x, gamma, beta, dy, dtype=tf.float32):
    x = tf.cast(tf.constant(x, tf.float32), dtype)
    gamma, beta = tf.constant(gamma, tf.float32), tf.constant(beta, tf.float32)
    with tf.GradientTape() as tape:
        tape.watch([x, gamma, beta])
        y = fused_layer_norm(x, gamma, beta, EPS)
    grads = tape.gradient(y, [x, gamma, beta], output_gradients=tf.cast(dy, dtype))
    return [np.asarray(tf.cast(t, tf.float32)) for t in (y, *grads)]


def data(shape, seed=0):
    rng = np.random.default_rng(seed)
    d = shape[-1]
    return (rng.normal(1.0, 3.0, shape).astype(np.float32), rng.normal(size=d).astype(np.float32),
            rng.normal(size=d).astype(np.float32), rng.normal(size=shape).astype(np.float32))


@pytest.mark.parametrize("isa", simd.ISAS)
@pytest.mark.parametrize("shape", SHAPES)
def test_float32_matches_the_reference(shape, isa, monkeypatch):
    require(isa)
    monkeypatch.setenv(ISA_ENV, isa)
    args = data(shape)
    for got, want in zip(fused(*args), reference(*args)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("isa", simd.ISAS)
@pytest.mark.parametrize("shape", [(2, 5, 256), (7, 300), (3, 13)])
def test_bfloat16_is_normalised_in_float_and_rounded(shape, isa, monkeypatch):
    """bfloat16 in and out, float inside: the output is the float result rounded to bfloat16 (so
    within one bfloat16 step of the reference), as Keras's mixed-precision layer does."""
    require(isa)
    monkeypatch.setenv(ISA_ENV, isa)
    x, gamma, beta, dy = data(shape)
    x16 = np.asarray(tf.cast(tf.cast(x, tf.bfloat16), tf.float32))  # what the kernel reads
    dy16 = np.asarray(tf.cast(tf.cast(dy, tf.bfloat16), tf.float32))
    y, dx, dgamma, dbeta = fused(x, gamma, beta, dy, tf.bfloat16)
    ry, rdx, rdgamma, rdbeta = reference(x16, gamma, beta, dy16)
    np.testing.assert_allclose(y, ry, rtol=2 ** -8, atol=1e-2)
    np.testing.assert_allclose(dx, rdx, rtol=2 ** -8, atol=1e-2)
    np.testing.assert_allclose(dgamma, rdgamma, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(dbeta, rdbeta, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_vector_and_scalar_loops_agree(isa, monkeypatch):
    require(isa)
    args = data((64, 260), seed=3)
    monkeypatch.setenv(ISA_ENV, isa)
    vector = fused(*args)
    monkeypatch.setenv(ISA_ENV, "scalar")
    for a, b in zip(vector, fused(*args)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_an_unknown_width_is_refused(monkeypatch):
    monkeypatch.setenv(ISA_ENV, "sse9")
    with pytest.raises(tf.errors.InvalidArgumentError, match="TF_NMT_LAYER_NORM_ISA"):
        fused(*data((2, 16)))


def test_matches_keras_layer_norm_with_the_same_weights():
    """The fused layer is Keras's LayerNormalization computed another way, in float32 and under
    mixed bfloat16 (output dtype included)."""
    x = tf.random.stateless_normal([3, 9, 64], seed=[1, 2]) * 2.0 + 0.5
    for policy in ("float32", "mixed_bfloat16"):
        plain = keras.layers.LayerNormalization(epsilon=EPS, dtype=policy)
        mine = FusedLayerNormalization(epsilon=EPS, dtype=policy)
        plain.build(x.shape)
        mine.build(x.shape)
        plain.gamma.assign(tf.random.stateless_normal([64], seed=[3, 4]))
        plain.beta.assign(tf.random.stateless_normal([64], seed=[5, 6]))
        mine.set_weights(plain.get_weights())
        want, got = plain(x), mine(x)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(np.float32(got), np.float32(want), rtol=1e-2 if policy != "float32" else 1e-5,
                                   atol=2e-2 if policy != "float32" else 1e-5)


def test_empty_rows_and_bad_input():
    ops = load_ops()
    y, mean, rstd = ops.fused_layer_norm(tf.zeros([0, 8]), tf.ones([8]), tf.zeros([8]), epsilon=EPS)
    assert y.shape == (0, 8) and mean.shape == (0,) and rstd.shape == (0,)
    _, dgamma, dbeta = ops.fused_layer_norm_grad(tf.zeros([0, 8]), tf.zeros([0, 8]), tf.ones([8]),
                                                 mean, rstd)
    assert np.all(dgamma.numpy() == 0) and np.all(dbeta.numpy() == 0)
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match="gamma and beta|rank|Shape"):
        ops.fused_layer_norm(tf.zeros([2, 8]), tf.ones([7]), tf.zeros([8]), epsilon=EPS)
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match="epsilon"):
        ops.fused_layer_norm(tf.zeros([2, 8]), tf.ones([8]), tf.zeros([8]), epsilon=0.0)
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match="one value per row"):
        ops.fused_layer_norm_grad(tf.zeros([2, 8]), tf.zeros([2, 8]), tf.ones([8]), tf.zeros([3]),
                                  tf.zeros([2]))
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):
        ops.fused_layer_norm_grad(tf.zeros([2, 8]), tf.zeros([2, 9]), tf.ones([9]), tf.zeros([2]),
                                  tf.zeros([2]))


def test_kernel_choice_and_layer_arguments():
    with pytest.raises(ConfigError, match="norm_kernel"):
        resolve_norm_kernel("fast")
    with pytest.raises(ConfigError, match="XLA"):
        resolve_norm_kernel("fused", jit_compile=True)
    assert resolve_norm_kernel("auto", jit_compile=True) == "tf"
    assert resolve_norm_kernel("fused") == "fused"
    with pytest.raises(ValueError):
        with use_kernels(norm="auto"):
            pass
    with pytest.raises(ValueError):
        with use_kernels(attention="fused"):
            pass
    with use_kernels(norm="fused"):
        assert type(make_layer_norm(EPS)) is FusedLayerNormalization
        assert kernels.current("dropout") == "tf"  # the other kernels are left alone
    assert type(make_layer_norm(EPS)) is keras.layers.LayerNormalization
    assert kernels.current("norm") == "tf"
    with pytest.raises(ValueError, match="last axis"):
        FusedLayerNormalization(axis=1)
    with pytest.raises(ValueError, match="center"):
        FusedLayerNormalization(center=False)
    layer = FusedLayerNormalization(epsilon=EPS, name="n")
    assert FusedLayerNormalization.from_config(layer.get_config()).epsilon == EPS


def test_transformer_checkpoints_move_between_kernels(tmp_path):
    """A Transformer built with fused norms has Keras's variables: a checkpoint of either loads
    into the other, and both compute the same function."""
    from tf_nmt.models import build_model

    hp = {"num_layers": 1, "d_model": 16, "num_heads": 2, "ff_dim": 32}
    ids = tf.constant([[3, 4, 5, 2], [6, 7, 2, 0]])
    inputs = {"source": ids, "target_in": ids}
    keras.utils.set_random_seed(0)
    plain = build_model("transformer", 40, **hp)
    plain(inputs, training=False)
    with use_kernels(norm="fused"):
        mine = build_model("transformer", 40, **hp)
    mine(inputs, training=False)
    norms = {type(layer) for layer in mine._flatten_layers()
             if isinstance(layer, keras.layers.LayerNormalization)}
    assert norms == {FusedLayerNormalization}
    path = tf.train.Checkpoint(model=plain).write(str(tmp_path / "ckpt"))
    tf.train.Checkpoint(model=mine).read(path).assert_consumed()
    np.testing.assert_allclose(mine(inputs, training=False).numpy(),
                               plain(inputs, training=False).numpy(), rtol=1e-4, atol=1e-4)
