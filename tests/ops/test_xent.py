"""The fused label-smoothed cross-entropy op (tf_nmt/ops/xent.py) against a float64 NumPy
reference: loss, gradient, every CPU row-loop width (AVX-512, AVX2, scalar), bad inputs, NaN,
padding."""
import os
import subprocess
import sys

import numpy as np
import pytest

from tf_nmt.compat import tf
from tf_nmt.ops import isa as simd
from tf_nmt.ops import xent
from tf_nmt.ops.loader import load_ops
from tests.ops.widths import require


def reference(logits, labels, eps):
    """float64 loss [N] and d(sum_i up_i * loss_i)/dlogits for up = 1."""
    x = logits.astype(np.float64)
    v = x.shape[1]
    m = x.max(1, keepdims=True)
    lse = (m + np.log(np.exp(x - m).sum(1, keepdims=True)))[:, 0]
    q = np.full(x.shape, eps / v)
    q[np.arange(len(labels)), labels] += 1 - eps
    loss = lse - (q * x).sum(1)
    return loss, np.exp(x - lse[:, None]) - q


def run(logits, labels, eps, upstream=None):
    x = tf.constant(logits)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = xent.smoothed_softmax_xent(x, labels, eps)
    up = tf.ones_like(loss) if upstream is None else tf.constant(upstream)
    return loss.numpy(), tape.gradient(loss, x, output_gradients=up).numpy()


@pytest.mark.parametrize("isa", simd.ISAS)
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.35])
@pytest.mark.parametrize("vocab", [1, 7, 9, 16, 33, 1000])  # the 8- and 16-lane loops' tails
def test_loss_and_gradient_match_the_reference(eps, vocab, isa, monkeypatch):
    require(isa)
    monkeypatch.setenv(xent.ISA_ENV, isa)
    rng = np.random.default_rng(vocab)
    logits = rng.normal(0, 4, (37, vocab)).astype(np.float32)
    labels = rng.integers(0, vocab, 37).astype(np.int32)
    loss, grad = run(logits, labels, eps)
    ref_loss, ref_grad = reference(logits, labels, eps)
    np.testing.assert_allclose(loss, ref_loss, rtol=2e-6, atol=2e-5)
    # The scalar loop sums exp serially in float: about 3e-6 relative on entries near 1.
    np.testing.assert_allclose(grad, ref_grad, rtol=5e-6, atol=2e-6)


@pytest.mark.parametrize("isa", simd.ISAS)
def test_extreme_logits_stay_finite_and_exact(isa, monkeypatch):
    require(isa)
    monkeypatch.setenv(xent.ISA_ENV, isa)
    logits = np.array([[1e4, -1e4, 0.0, 80.0], [-200.0, -150.0, -100.0, -300.0]], np.float32)
    labels = np.array([1, 2], np.int32)
    loss, grad = run(logits, labels, 0.1)
    ref_loss, ref_grad = reference(logits, labels, 0.1)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-6)
    np.testing.assert_allclose(grad, ref_grad, atol=1e-6)


def test_upstream_scales_rows_and_zero_rows_get_zero_gradient():
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(6, 50)).astype(np.float32)
    labels = rng.integers(0, 50, 6).astype(np.int32)
    up = np.array([0.5, 0.0, 2.0, 0.0, 1.0, -1.0], np.float32)
    _, grad = run(logits, labels, 0.1, up)
    _, ref_grad = reference(logits, labels, 0.1)
    np.testing.assert_allclose(grad, ref_grad * up[:, None], atol=2e-6)
    assert not grad[1].any() and not grad[3].any()


def test_logits_are_unchanged_after_the_gradient():
    """The gradient kernel may write over its logits input only when TF hands the buffer over."""
    rng = np.random.default_rng(3)
    x = tf.constant(rng.normal(size=(4, 20)).astype(np.float32))
    before = x.numpy().copy()
    ops = load_ops()
    loss, lse = ops.smoothed_softmax_xent(x, [1, 2, 3, 4], smoothing=0.1)
    ops.smoothed_softmax_xent_grad(x, [1, 2, 3, 4], lse, tf.ones_like(loss), smoothing=0.1)
    np.testing.assert_array_equal(x.numpy(), before)


@pytest.mark.parametrize("isa", simd.ISAS)
def test_nan_logits_give_nan_loss_and_gradient(isa, monkeypatch):
    require(isa)
    monkeypatch.setenv(xent.ISA_ENV, isa)
    logits = np.zeros((2, 20), np.float32)
    logits[0, 5] = np.nan
    loss, grad = run(logits, np.array([1, 1], np.int32), 0.1)
    assert np.isnan(loss[0]) and np.isnan(grad[0]).all()
    assert np.isfinite(loss[1]) and np.isfinite(grad[1]).all()


@pytest.mark.parametrize("labels, message", [([0, 20], "outside"), ([-1, 0], "outside"),
                                             ([0], "labels must be")])
def test_bad_labels_are_refused(labels, message):
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        xent.smoothed_softmax_xent(tf.zeros([2, 20]), labels, 0.1)


def test_bad_shapes_and_smoothing_are_refused():
    ops = load_ops()
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):
        ops.smoothed_softmax_xent(tf.zeros([2, 3, 4]), [0, 0], smoothing=0.1)
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match="smoothing"):
        ops.smoothed_softmax_xent(tf.zeros([2, 4]), [0, 0], smoothing=1.0)
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):
        ops.smoothed_softmax_xent_grad(tf.zeros([2, 4]), [0, 0], tf.zeros([3]), tf.zeros([2]),
                                       smoothing=0.1)


_SCALAR_CHILD = """
import sys, numpy as np
from tf_nmt.ops import xent
from tf_nmt.compat import tf
rng = np.random.default_rng(5)
x = tf.constant(rng.normal(0, 3, (64, 1003)).astype(np.float32))
y = rng.integers(0, 1003, 64).astype(np.int32)
with tf.GradientTape() as t:
    t.watch(x)
    loss = xent.smoothed_softmax_xent(x, y, 0.1)
np.savez(sys.argv[1], loss=loss.numpy(), grad=t.gradient(loss, x).numpy())
"""


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_vector_and_scalar_paths_agree(isa, tmp_path):
    """$TF_NMT_XENT_ISA caps the row loops: each vector width agrees with the scalar loop within
    float rounding (and so with the reference)."""
    require(isa)
    out = {}
    for name in ("scalar", isa):
        env = {**os.environ, xent.ISA_ENV: name, "TF_CPP_MIN_LOG_LEVEL": "3"}
        path = tmp_path / f"{name}.npz"
        subprocess.run([sys.executable, "-c", _SCALAR_CHILD, str(path)], env=env, check=True,
                       cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
        out[name] = np.load(path)
    np.testing.assert_allclose(out[isa]["loss"], out["scalar"]["loss"], rtol=1e-6)
    np.testing.assert_allclose(out[isa]["grad"], out["scalar"]["grad"], rtol=3e-6, atol=1e-9)


def test_isa_follows_the_cpu_and_the_cap(monkeypatch):
    """The kernels take the widest loops the CPU's flags allow, at most $TF_NMT_XENT_ISA; an
    unknown cap is refused by the Python side and by the op."""
    flags = open("/proc/cpuinfo").read().split()
    want = ("avx512" if all(f in flags for f in ("avx512f", "avx512dq", "avx512bw", "avx512vl"))
            else "avx2" if "avx2" in flags and "fma" in flags else "scalar")
    monkeypatch.delenv(xent.ISA_ENV, raising=False)
    assert simd.cpu_isa() == xent.isa() == want
    monkeypatch.setenv(xent.ISA_ENV, "scalar")
    assert xent.isa() == "scalar" and not xent.simd_available()
    monkeypatch.setenv(xent.ISA_ENV, "avx512")
    assert xent.isa() == want
    monkeypatch.setenv(xent.ISA_ENV, "sse9")
    with pytest.raises(ValueError, match="TF_NMT_XENT_ISA"):
        xent.isa()
    with pytest.raises(tf.errors.InvalidArgumentError, match="TF_NMT_XENT_ISA"):
        xent.row_argmax(tf.zeros([2, 3]))


@pytest.mark.parametrize("isa", simd.ISAS)
@pytest.mark.parametrize("vocab", [7, 33, 1000])
def test_bfloat16_logits_are_read_as_float(vocab, isa, monkeypatch):
    """Mixed precision: bfloat16 logits give the float32 result of the same (rounded) values, and
    a bfloat16 gradient within one rounding of the float one (the label's entry included), with
    every row-loop width."""
    require(isa)
    monkeypatch.setenv(xent.ISA_ENV, isa)
    rng = np.random.default_rng(vocab)
    logits = tf.cast(rng.normal(0, 4, (37, vocab)).astype(np.float32), tf.bfloat16)
    labels = rng.integers(0, vocab, 37).astype(np.int32)
    up = rng.uniform(0.5, 2.0, 37).astype(np.float32)
    up[3] = 0.0  # a padding row
    with tf.GradientTape() as tape:
        tape.watch(logits)
        loss = xent.smoothed_softmax_xent(logits, labels, 0.1)
    grad = tape.gradient(loss, logits, output_gradients=tf.constant(up))
    assert loss.dtype == tf.float32 and grad.dtype == tf.bfloat16
    want_loss, want_grad = reference(np.float32(tf.cast(logits, tf.float32)), labels, 0.1)
    np.testing.assert_allclose(loss.numpy(), want_loss, rtol=1e-5, atol=1e-5)
    want_grad = want_grad * up[:, None]
    got = np.float32(tf.cast(grad, tf.float32))
    np.testing.assert_allclose(got, want_grad, rtol=2 ** -8, atol=1e-6)
    assert np.all(got[3] == 0)


def test_a_model_built_for_the_fused_loss_hands_it_bfloat16_logits():
    """Under mixed precision the trainer's model (built with use_kernels(loss="fused")) skips the
    [B, T, V] cast to float32; models built elsewhere keep float32 logits, and both give the same
    loss."""
    from tf_nmt.compat import keras
    from tf_nmt.models import build_model
    from tf_nmt.models.kernels import use_kernels
    from tf_nmt.models.losses import LabelSmoothedCrossEntropy

    ids = tf.constant([[3, 4, 5, 2], [6, 7, 2, 0]])
    inputs = {"source": ids, "target_in": ids}
    hp = {"num_layers": 1, "d_model": 16, "num_heads": 2, "ff_dim": 32}
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        keras.utils.set_random_seed(0)
        plain = build_model("transformer", 40, **hp)
        with use_kernels(loss="fused"):
            fused = build_model("transformer", 40, **hp)
        plain(inputs)
        fused(inputs)
        fused.set_weights(plain.get_weights())
        a, b = plain(inputs), fused(inputs)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    assert a.dtype == tf.float32 and b.dtype == tf.bfloat16
    np.testing.assert_array_equal(a.numpy(), np.float32(tf.cast(b, tf.float32)))
    loss = LabelSmoothedCrossEntropy(0.1, kernel="fused")
    assert float(loss(ids, a)) == float(loss(ids, b))


@pytest.mark.parametrize("isa", simd.ISAS)
@pytest.mark.parametrize("vocab", [1, 7, 8, 9, 16, 33, 8000])
def test_row_argmax_is_tf_argmax(vocab, isa, monkeypatch):
    """The accuracy metric's argmax: tf.argmax's index, ties to the first, both dtypes, with every
    row-loop width (vocabularies around the 8- and 16-lane tails)."""
    require(isa)
    monkeypatch.setenv(xent.ISA_ENV, isa)
    rng = np.random.default_rng(vocab)
    logits = rng.normal(0, 1, (41, vocab)).astype(np.float32)
    logits[5] = 0.0  # all tied: index 0
    logits[6, -1] = logits[6].max() + 1.0  # the last column (the vector loops' tail)
    logits[7] = -np.inf
    if vocab > 3:
        logits[8, 1] = logits[8, 3] = logits[8].max() + 1.0  # a tie across columns: the first
    for dtype in (tf.float32, tf.bfloat16):
        x = tf.cast(logits, dtype)
        np.testing.assert_array_equal(xent.row_argmax(x).numpy(),
                                      tf.argmax(x, -1, output_type=tf.int32).numpy())


def test_row_argmax_refuses_bad_shapes():
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):
        xent.row_argmax(tf.zeros([4]))
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):
        xent.row_argmax(tf.zeros([4, 0]))
    assert xent.row_argmax(tf.zeros([0, 5])).shape == (0,)
