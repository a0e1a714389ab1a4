"""Choosing the fixed activation scale once: record a model's matmul inputs on a few batches and
fit the optimised log scale to them (:func:`calibrate_scale`)."""
from __future__ import annotations

from typing import Dict, Iterable, List

import numpy as np

from tf_nmt import ops
from tf_nmt.compat import keras, tf
from tf_nmt.config import ConfigError
from tf_nmt.models.activation_quant.engines import MatMulEngine, use_engine


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
