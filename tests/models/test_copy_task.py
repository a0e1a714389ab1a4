"""Sanity: each model learns to copy short random sequences in a few hundred steps."""
import numpy as np
import pytest

from tf_nmt.compat import keras, tf
from tf_nmt.models import build_model
from tf_nmt.models.decoding import greedy_search
from tf_nmt.models.losses import label_smoothed_nll

VOCAB, BATCH, MAX_LEN = 12, 32, 5


def copy_batch(rng):
    lengths = rng.randint(2, MAX_LEN + 1, BATCH)
    source = np.zeros((BATCH, MAX_LEN + 1), np.int32)
    target_in = np.zeros_like(source)
    target_out = np.zeros_like(source)
    for i, n in enumerate(lengths):
        tokens = rng.randint(4, VOCAB, n)
        source[i, : n + 1] = list(tokens) + [3]
        target_in[i, : n + 1] = [2] + list(tokens)
        target_out[i, : n + 1] = list(tokens) + [3]
    return {"source": tf.constant(source), "target_in": tf.constant(target_in)}, tf.constant(target_out)


@pytest.mark.parametrize("kind,hparams,lr", [
    ("transformer", dict(num_layers=2, d_model=32, num_heads=2, ff_dim=64, dropout=0.0), 5e-3),
    ("gnmt", dict(num_layers=2, units=32, attention="luong", dropout=0.0), 1e-2)])
def test_learns_to_copy(kind, hparams, lr, steps=120):
    tf.random.set_seed(1)
    rng = np.random.RandomState(0)
    model = build_model(kind, VOCAB, **hparams)
    optimizer = keras.optimizers.Adam(lr)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            total, count = label_smoothed_nll(y, model(x, training=True), 0.0)
            loss = total / count
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                      model.trainable_variables))
        return loss

    losses = [float(train_step(*copy_batch(rng))) for _ in range(steps)]
    assert np.mean(losses[-20:]) < 0.15 * np.mean(losses[:5]), losses[::25]
    x, y = copy_batch(rng)
    ids, _ = greedy_search(model, x["source"])
    width = y.shape[1]
    got = np.pad(ids.numpy(), [[0, 0], [0, max(0, width - ids.shape[1])]])[:, :width]
    exact = (got == y.numpy()).all(axis=1).mean()
    assert exact >= 0.5, exact
