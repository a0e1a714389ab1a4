"""Re-training under quantisation: after every step the selected weights lie exactly on the
quantisation grid; error feedback follows the NumPy reference; training still learns."""
import numpy as np
import pytest

import tf_nmt  # noqa: F401
from tests.ops import reference as ref
from tf_nmt import ops
from tf_nmt.compat import keras, tf
from tf_nmt.quantization.codec import decode_np
from tf_nmt.quantization.policy import QuantPolicy
from tf_nmt.quantization.retrain import QuantizedRetraining


def on_grid(values: np.ndarray, scale: float, bits: int, kind: str) -> bool:
    grid = decode_np(np.arange(1 << bits, dtype=np.uint8), scale, bits, kind)
    return bool(np.isin(values, grid).all())


def small_model(seed=0):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(1)])
    model.build([None, 8])
    return model


class GridCheck(keras.callbacks.Callback):
    def __init__(self, quantizer):
        super().__init__()
        self.q, self.steps, self.moved = quantizer, 0, 0
        self.previous = None

    def on_train_batch_end(self, batch, logs=None):
        p = self.q.policy
        for var, scale in zip(self.q.targets, self.q.state.scales):
            assert on_grid(var.numpy(), float(scale.numpy()), p.bits, p.kind), var.name
        now = [v.numpy().copy() for v in self.q.targets]
        if self.previous is not None:
            self.moved += sum(int((a != b).sum()) for a, b in zip(now, self.previous))
        self.previous = now
        self.steps += 1


@pytest.mark.parametrize("kind,bits,feedback", [("log", 4, True), ("log", 2, False), ("fixed", 4, True)])
def test_weights_on_grid_after_every_step_and_loss_falls(kind, bits, feedback):
    model = small_model()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 8)).astype(np.float32)
    y = (x @ rng.standard_normal((8, 1)) * 0.5).astype(np.float32)
    quantizer = QuantizedRetraining(model, QuantPolicy(bits=bits, kind=kind), error_feedback=feedback)
    assert [v.name for v in quantizer.targets] == [model.weights[0].name, model.weights[2].name]  # kernels only
    check = GridCheck(quantizer)
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    history = model.fit(x, y, batch_size=32, epochs=6, verbose=0, shuffle=False,
                        callbacks=[quantizer, check])
    assert check.steps == 6 * 8
    assert check.moved > 0  # the weights do move between grid points
    losses = history.history["loss"]
    if feedback:  # (without it, 2-bit SGD updates are mostly rounded away: the ablation's point)
        assert losses[-1] < 0.7 * losses[0]
    bias = model.weights[1].numpy()
    assert np.unique(bias).size > 4  # not quantised


def test_error_feedback_step_matches_numpy_reference():
    model = small_model(3)
    quantizer = QuantizedRetraining(model, QuantPolicy(bits=4, scale="optimised", quantize_biases=True))
    assert len(quantizer.targets) == 4
    before = [v.numpy().copy() for v in quantizer.targets]
    residuals = [np.random.default_rng(i).standard_normal(v.shape).astype(np.float32) * 0.01
                 for i, v in enumerate(before)]
    for r, value in zip(quantizer.state.residuals, residuals):
        r.assign(value)
    quantizer.requantize()
    for var, res, scale, w, r in zip(quantizer.targets, quantizer.state.residuals,
                                     quantizer.state.scales, before, residuals):
        full = (w + r).astype(np.float32)
        np.testing.assert_allclose(float(scale.numpy()), ref.fit_scale("log", full, 4), rtol=1e-5)
        s = float(scale.numpy())  # the reference fit sums in another order: same to ~1e-6
        q = ref.decode("log", ref.encode("log", full, s, 4), s, 4)
        np.testing.assert_array_equal(var.numpy(), q)
        np.testing.assert_allclose(res.numpy(), full - q, rtol=0, atol=1e-7)


def test_without_feedback_small_updates_are_rounded_away():
    model = small_model(1)
    q = QuantizedRetraining(model, QuantPolicy(bits=4), error_feedback=False)
    q.requantize()
    start = [ops.LOG.encode(v, s, 4).numpy() for v, s in zip(q.targets, q.state.scales)]
    for _ in range(5):  # nudges far below half a grid step
        for v in q.targets:
            v.assign_add(tf.fill(v.shape, 1e-6))
        q.requantize()
    for v, s, codes in zip(q.targets, q.state.scales, start):  # same grid points (S moves by ~1e-6)
        np.testing.assert_array_equal(ops.LOG.encode(v, s, 4).numpy(), codes)
    assert all(float(np.abs(r.numpy()).max()) == 0 for r in q.state.residuals)  # never used
    # With feedback the same nudges accumulate in the residual instead of vanishing.
    fb = QuantizedRetraining(small_model(1), QuantPolicy(bits=4), error_feedback=True)
    fb.requantize()
    base = [r.numpy().copy() for r in fb.state.residuals]
    for _ in range(5):
        for v in fb.targets:
            v.assign_add(tf.fill(v.shape, 1e-6))
        fb.requantize()
    moved = sum(float(np.abs(r.numpy() - b).sum()) for r, b in zip(fb.state.residuals, base))
    assert moved > 0
