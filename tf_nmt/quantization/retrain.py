"""Re-training under quantisation: after every optimiser update the selected weights are
re-quantised (the scale S re-fitted each time), so the model always holds grid values.

With error feedback the quantisation error is kept as a residual and added back before the next
quantisation::

    full = w + r;   w = Q(full);   r = full - w

so small updates that Q would round away accumulate until they move a weight to the next level.
Without it (the ablation) ``w = Q(w)``. Residuals, the last scales and whether the first
quantisation happened are variables, so they are checkpointed with the run and a resumed run
continues exactly.
"""
from __future__ import annotations

from typing import List

from tf_nmt import ops
from tf_nmt.compat import keras, tf
from tf_nmt.quantization.policy import QuantPolicy


class QuantizedRetraining(keras.callbacks.Callback):
    """Keras callback keeping ``model``'s selected weights on the quantisation grid."""

    def __init__(self, model: keras.Model, policy: QuantPolicy, error_feedback: bool = True) -> None:
        super().__init__()
        self.policy = policy
        self.error_feedback = error_feedback
        self.quantizer = ops.LOG if policy.kind == "log" else ops.FIXED
        self.targets: List[tf.Variable] = [v for v in model.trainable_weights
                                           if policy.quantizes(v.shape)]
        if not self.targets:
            raise ValueError("the quantisation policy selects no trainable weights of this model")
        self.state = tf.Module(name="quantized_retraining")
        with tf.init_scope():
            self.state.residuals = [tf.Variable(tf.zeros(v.shape, tf.float32), trainable=False,
                                                name="residual") for v in self.targets]
            self.state.scales = [tf.Variable(0.0, trainable=False, name="scale") for _ in self.targets]
            self.state.started = tf.Variable(False, trainable=False, name="started")

    @tf.function
    def requantize(self) -> None:
        """One re-quantisation of every target (and its residual)."""
        p = self.policy
        for var, residual, scale in zip(self.targets, self.state.residuals, self.state.scales):
            value = tf.convert_to_tensor(var, tf.float32)
            full = value + residual if self.error_feedback else value
            codes, s = self.quantizer.quantize(full, p.bits, p.scale, p.iterations)
            q = self.quantizer.decode(codes, s, p.bits)
            if self.error_feedback:
                residual.assign(full - q)
            scale.assign(s)
            var.assign(tf.cast(q, var.dtype))
        self.state.started.assign(True)

    def on_train_begin(self, logs=None) -> None:
        if not bool(self.state.started.numpy()):  # a resumed run is already on the grid
            self.requantize()

    def on_train_batch_end(self, batch, logs=None) -> None:
        self.requantize()


def from_train_config(model: keras.Model, t) -> "QuantizedRetraining | None":
    """The callback a ``TrainConfig`` asks for (``quantize_bits > 0``), else None."""
    if not t.quantize_bits:
        return None
    policy = QuantPolicy(bits=t.quantize_bits, kind=t.quantize_kind, scale=t.quantize_scale,
                         quantize_biases=t.quantize_biases)
    return QuantizedRetraining(model, policy, error_feedback=t.quantize_error_feedback)
