"""Mixed-precision policy choice per device (tf_nmt.training.precision); runs on CPU."""
import numpy as np
import pytest

import tf_nmt  # noqa: F401
from tf_nmt.compat import keras, tf
from tf_nmt.training import precision


@pytest.mark.parametrize("caps, want", [
    ([], "mixed_bfloat16"),                      # CPU only
    ([(8, 0)], "mixed_bfloat16"),                # A100
    ([(9, 0), (9, 0)], "mixed_bfloat16"),        # H100 x2
    ([(7, 5)], "mixed_float16"),                 # T4
    ([(7, 0)], "mixed_float16"),                 # V100
    ([(9, 0), (7, 5)], "mixed_float16"),         # mixed node: the weakest GPU decides
])
def test_policy_for_device(caps, want):
    assert precision.policy_for_device(True, capabilities=caps) == want
    assert precision.policy_for_device(False, capabilities=caps) == "float32"


def test_this_machine_without_gpu_keeps_bf16():
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("machine has a GPU")
    assert precision.gpu_compute_capabilities() == []
    assert precision.policy_for_device(True) == "mixed_bfloat16"


def test_wrap_optimizer_only_for_float16():
    opt = keras.optimizers.Adam(1e-3)
    assert precision.wrap_optimizer(opt, "mixed_bfloat16") is opt
    assert precision.wrap_optimizer(opt, "float32") is opt
    wrapped = precision.wrap_optimizer(opt, "mixed_float16")
    assert isinstance(wrapped, keras.mixed_precision.LossScaleOptimizer)
    assert precision.wrap_optimizer(wrapped, "mixed_float16") is wrapped
    with pytest.raises(ValueError):
        precision.needs_loss_scaling("float64")


def test_float16_loss_scaling_trains_a_tiny_model():
    """A mixed_float16 Dense model with the wrapped optimizer takes finite steps (CPU is enough)."""
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = keras.Sequential([keras.layers.Dense(8, input_shape=(4,)), keras.layers.Dense(1, dtype="float32")])
        model.compile(optimizer=precision.wrap_optimizer(keras.optimizers.SGD(0.05), "mixed_float16"), loss="mse")
        x = np.random.default_rng(0).standard_normal((64, 4)).astype(np.float32)
        y = x.sum(axis=1, keepdims=True)
        hist = model.fit(x, y, epochs=3, batch_size=16, verbose=0).history["loss"]
        assert np.all(np.isfinite(hist)) and hist[-1] < hist[0]
    finally:
        keras.mixed_precision.set_global_policy("float32")
