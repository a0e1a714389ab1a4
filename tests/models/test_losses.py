"""Label-smoothed loss against a NumPy reference; Keras compile/fit optimises the token mean."""
import numpy as np
import pytest

from tests.models.helpers import batch, labels
from tf_nmt.models import build_model
from tf_nmt.compat import keras, tf
from tf_nmt.config import ConfigError
from tf_nmt.models.losses import (LabelSmoothedCrossEntropy, MaskedAccuracy, TokenCount,
                                  label_smoothed_nll, resolve_loss_kernel)
from tf_nmt.ops import isa

KERNELS = ["tf", "fused"]


def reference(labels, logits, eps, pad=0):
    logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - logits.max(-1, keepdims=True)
    vocab = logits.shape[-1]
    q = np.full(logits.shape, eps / vocab)
    np.put_along_axis(q, labels[..., None], 1 - eps + eps / vocab, axis=-1)
    per_token = -(q * logp).sum(-1)
    mask = labels != pad
    return (per_token * mask).sum(), mask.sum()


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_matches_numpy_reference(eps, kernel):
    rng = np.random.RandomState(0)
    logits = rng.normal(0, 3, (3, 5, 11)).astype(np.float32)
    y = rng.randint(1, 11, (3, 5))
    y[0, 3:] = 0
    y[2, 1:] = 0
    total, count = label_smoothed_nll(tf.constant(y), tf.constant(logits), eps, kernel=kernel)
    ref_total, ref_count = reference(y, logits.astype(np.float64), eps)
    assert float(count) == ref_count == 9
    np.testing.assert_allclose(float(total), ref_total, rtol=1e-5)
    loss = LabelSmoothedCrossEntropy(eps, kernel=kernel)(tf.constant(y), tf.constant(logits))
    np.testing.assert_allclose(float(loss), ref_total / ref_count, rtol=1e-5)


def test_pad_logits_do_not_matter():
    rng = np.random.RandomState(1)
    logits = rng.normal(size=(2, 4, 7)).astype(np.float32)
    y = np.array([[4, 5, 0, 0], [6, 0, 0, 0]])
    changed = logits.copy()
    changed[y == 0] = 1e3
    loss = LabelSmoothedCrossEntropy(0.1)
    assert float(loss(y, logits)) == pytest.approx(float(loss(y, changed)), rel=1e-6)


def test_all_pad_batch_gives_zero_not_nan():
    assert float(LabelSmoothedCrossEntropy(0.1)(tf.zeros([2, 3], tf.int32), tf.zeros([2, 3, 5]))) == 0.0


def test_invalid_smoothing():
    with pytest.raises(ValueError, match="smoothing"):
        LabelSmoothedCrossEntropy(1.0)


@pytest.mark.parametrize("kernel", KERNELS)
def test_fit_optimises_the_token_mean_and_counts_tokens(kernel):
    tf.random.set_seed(0)
    model = build_model("transformer", 29, num_layers=1, d_model=16, num_heads=2, ff_dim=16, dropout=0.0)
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=LabelSmoothedCrossEntropy(0.1, kernel=kernel),
                  metrics=[TokenCount(name="tokens"), MaskedAccuracy(name="accuracy", kernel=kernel)])
    x, y = batch(), labels()
    history = model.fit(tf.data.Dataset.from_tensors((x, y)).repeat(2), epochs=1, verbose=0)
    logits = model(x, training=False).numpy()  # lr 0: the weights fit saw
    ref_total, ref_count = reference(y.numpy(), logits.astype(np.float64), 0.1)
    np.testing.assert_allclose(history.history["loss"][0], ref_total / ref_count, rtol=1e-5)
    assert history.history["tokens"][0] == 2 * 8.0
    mask = y.numpy() != 0
    expected_acc = ((logits.argmax(-1) == y.numpy()) & mask).sum() / mask.sum()
    np.testing.assert_allclose(history.history["accuracy"][0], expected_acc, rtol=1e-6)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_hand_written_gradient_equals_the_dense_smoothed_target_gradient(eps, kernel):
    """d loss / d logits is ``(softmax - q) * weight / n_tokens``, zero on pad positions, as the
    dense-target cross-entropy (the textbook form) gives it by autodiff."""
    rng = np.random.RandomState(2)
    logits = tf.constant(rng.normal(0, 3, (3, 6, 13)).astype(np.float32))
    y = rng.randint(1, 13, (3, 6))
    y[1, 2:] = 0
    q = tf.one_hot(y, 13) * (1 - eps) + eps / 13
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(logits)
        ours = LabelSmoothedCrossEntropy(eps, kernel=kernel)(tf.constant(y), logits)
        per_token = tf.nn.softmax_cross_entropy_with_logits(labels=q, logits=logits)
        mask = tf.cast(y != 0, tf.float32)
        dense = tf.reduce_sum(per_token * mask) / tf.reduce_sum(mask)
    np.testing.assert_allclose(float(ours), float(dense), rtol=1e-5)
    got, want = tape.gradient(ours, logits).numpy(), tape.gradient(dense, logits).numpy()
    np.testing.assert_allclose(got, want, atol=1e-7)
    assert not got[1, 2:].any()
    assert np.abs(got).max() > 1e-3


def test_loss_kernel_choice():
    """auto takes the fused op where it is fast (AVX2 + FMA or AVX-512, no GPU, library built) and
    never under XLA; fused under XLA and unknown names are configuration errors."""
    assert resolve_loss_kernel("tf") == "tf"
    assert resolve_loss_kernel("fused") == "fused"
    assert resolve_loss_kernel("auto", jit_compile=True) == "tf"
    fast = isa.cpu_isa() != "scalar" and not tf.config.list_physical_devices("GPU")
    assert resolve_loss_kernel("auto") == ("fused" if fast else "tf")
    with pytest.raises(ConfigError, match="XLA"):
        resolve_loss_kernel("fused", jit_compile=True)
    with pytest.raises(ConfigError, match="loss_kernel"):
        resolve_loss_kernel("cuda")
    assert LabelSmoothedCrossEntropy(0.1, kernel="fused").get_config()["kernel"] == "fused"


def test_a_training_step_is_the_same_with_either_kernel():
    """One SGD step of a small Transformer from the same weights: the fused kernel and the TF
    composition give the same loss and the same updated weights (within float rounding). SGD,
    not Adam: Adam's first step is about lr * sign(g), which turns rounding noise in a gradient
    near zero into a full-size difference."""
    x, y = batch(), labels()
    model = build_model("transformer", 29, num_layers=1, d_model=16, num_heads=2, ff_dim=16,
                        dropout=0.0)
    model(x)
    start = [w.numpy() for w in model.weights]
    results = {}
    for kernel in KERNELS:
        model.set_weights(start)
        model.compile(optimizer=keras.optimizers.SGD(0.5),
                      loss=LabelSmoothedCrossEntropy(0.1, kernel=kernel))
        loss = model.train_on_batch(x, y)
        results[kernel] = (loss, [w.numpy() for w in model.weights])
    np.testing.assert_allclose(results["tf"][0], results["fused"][0], rtol=1e-5)
    for a, b in zip(results["tf"][1], results["fused"][1]):
        np.testing.assert_allclose(a, b, atol=1e-6)
    moved = max(np.abs(a - b).max() for a, b in zip(results["fused"][1], start))
    assert moved > 1e-3  # the step did change the weights
