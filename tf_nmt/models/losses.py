"""Label-smoothed cross-entropy averaged over non-pad target tokens, and token-level metrics.

Smoothing spreads ``smoothing`` of the target mass uniformly over the whole vocabulary:
``q = (1 - eps) * onehot(y) + eps / V``. The loss ``-sum_v q_v log p_v`` equals
``nll + eps * (logit_y - mean(logits))``, which reuses the fused sparse cross-entropy kernel and
never materialises a [B,T,V] log-probability tensor.

Its gradient, ``softmax - q``, is written by hand (:func:`smoothed_cross_entropy`): the fused
kernel already returns ``softmax - onehot``, so the gradient is that minus ``eps / V``, scaled,
plus ``eps`` at each label, two passes over the [B,T,V] logits. Autodiff of the formula above
makes about nine (a dense scatter for the gather's gradient, a broadcast for the mean's, their
sum), which the training profile showed as ~5% of a quickstart step.

``kernel="fused"`` computes the same loss and gradient with the C++ op of
:mod:`tf_nmt.ops.xent`: one pass over the logits forward (log-sum-exp, sum, label logit) and
one backward (the softmax recomputed from the log-sum-exp), where the composition above still
makes about eight. :func:`resolve_loss_kernel` picks it where it is fast (``train.loss_kernel``).
"""
from __future__ import annotations

from typing import Optional, Tuple

from tf_nmt.compat import KERAS3, keras, tf
from tf_nmt.models.base import PAD_ID
from tf_nmt.models.kernels import KERNEL_SETTINGS, resolve_kernel

LOSS_KERNELS = KERNEL_SETTINGS


def resolve_loss_kernel(kernel: str = "auto", jit_compile: bool = False) -> str:
    """``"fused"`` or ``"tf"`` for ``train.loss_kernel`` (see
    :func:`tf_nmt.models.kernels.resolve_kernel`)."""
    return resolve_kernel("loss_kernel", kernel, jit_compile)


def label_smoothed_nll(labels: tf.Tensor, logits: tf.Tensor, smoothing: float,
                       pad_id: int = PAD_ID, kernel: str = "tf") -> Tuple[tf.Tensor, tf.Tensor]:
    """(sum of smoothed per-token losses over non-pad labels, number of non-pad labels), float32.
    ``kernel``: ``"tf"`` or ``"fused"`` (see :func:`resolve_loss_kernel`); the fused kernel reads
    bfloat16 logits as they are (computing in float), everything else is cast to float32."""
    labels = tf.cast(labels, tf.int32)
    if not (kernel == "fused" and logits.dtype == tf.bfloat16):
        logits = tf.cast(logits, tf.float32)
    if kernel == "fused":
        from tf_nmt.ops.xent import smoothed_softmax_xent

        vocab = tf.shape(logits)[-1]
        flat = smoothed_softmax_xent(tf.reshape(logits, [-1, vocab]), tf.reshape(labels, [-1]),
                                     smoothing)
        per_token = tf.reshape(flat, tf.shape(labels))
    elif kernel == "tf":
        per_token = smoothed_cross_entropy(labels, logits, smoothing)
    else:
        raise ValueError(f"kernel must be 'tf' or 'fused' (resolve 'auto' first), got {kernel!r}")
    weights = tf.cast(tf.not_equal(labels, pad_id), tf.float32)
    return tf.reduce_sum(per_token * weights), tf.reduce_sum(weights)


def smoothed_cross_entropy(labels: tf.Tensor, logits: tf.Tensor, smoothing: float) -> tf.Tensor:
    """Per-token ``-sum_v q_v log softmax(logits)_v`` [...], float32, with the gradient
    ``softmax - q`` computed from the fused kernel's ``softmax - onehot`` (see the module doc).

    Args:
        labels: int32 [...] class ids in ``[0, V)``.
        logits: float32 [..., V].
        smoothing: ``eps`` in ``[0, 1)``.
    """
    vocab = tf.shape(logits)[-1]
    flat_labels = tf.reshape(labels, [-1])

    @tf.custom_gradient
    def loss_fn(logits):
        flat = tf.reshape(logits, [-1, vocab])
        nll, backprop = tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=flat,
                                                                       labels=flat_labels)
        per_token = nll
        if smoothing:
            target_logit = tf.gather(flat, flat_labels[:, None], batch_dims=1)[:, 0]
            per_token += smoothing * (target_logit - tf.reduce_mean(flat, axis=-1))

        def grad(upstream):
            up = tf.reshape(upstream, [-1, 1])
            g = backprop * up
            if smoothing:  # softmax - q = (softmax - onehot) + eps * onehot - eps / V
                g -= up * (smoothing / tf.cast(vocab, tf.float32))
                rows = tf.range(tf.shape(flat_labels)[0])
                g = tf.tensor_scatter_nd_add(g, tf.stack([rows, flat_labels], axis=1),
                                             smoothing * up[:, 0])
            return tf.reshape(g, tf.shape(logits))

        return tf.reshape(per_token, tf.shape(labels)), grad

    return loss_fn(logits)


class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """Token-mean label-smoothed cross-entropy of logits [B,T,V] against labels [B,T].

    ``call`` already returns the scalar mean over the batch's non-pad tokens and the reduction is
    SUM (of that one scalar), so ``model.compile(loss=...)`` optimises exactly the token mean
    (Keras' default would average per-sentence means instead).

    Args:
        smoothing: ``eps`` in ``[0, 1)``.
        pad_id: labels equal to it do not count.
        kernel: ``"auto"``, ``"fused"`` or ``"tf"``, resolved once here by
            :func:`resolve_loss_kernel` (pass the resolved name when XLA compiles the step).

    Example:
        >>> loss = LabelSmoothedCrossEntropy(0.1, kernel="tf")
        >>> float(loss(tf.constant([[5, 0]]), tf.zeros([1, 2, 8]))) == float(tf.math.log(8.0))
        True
    """

    def __init__(self, smoothing: float = 0.1, pad_id: int = PAD_ID, kernel: str = "auto",
                 name: str = "label_smoothed_cross_entropy") -> None:
        super().__init__(reduction="sum", name=name)
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
        self.smoothing, self.pad_id = float(smoothing), int(pad_id)
        self.kernel = resolve_loss_kernel(kernel)

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        loss_sum, n_tokens = label_smoothed_nll(y_true, y_pred, self.smoothing, self.pad_id,
                                                self.kernel)
        return loss_sum / tf.maximum(n_tokens, 1.0)

    if KERAS3:
        def __call__(self, y_true, y_pred, sample_weight=None):
            """Keras 3's ``Loss.__call__`` would cast the labels and the (bfloat16, for the fused
            kernel) logits to float32 first; ``call`` already returns the reduced token mean."""
            if sample_weight is not None:
                raise ValueError("LabelSmoothedCrossEntropy takes no sample_weight: pad tokens "
                                 "are masked by the labels")
            with tf.name_scope(self.name):
                return self.call(y_true, y_pred)

    def get_config(self):
        return {"smoothing": self.smoothing, "pad_id": self.pad_id, "kernel": self.kernel,
                "name": self.name}


class TokenCount(keras.metrics.Metric):
    """Running number of non-pad target tokens seen (reset with the other metrics each epoch)."""

    def __init__(self, pad_id: int = PAD_ID, name: str = "tokens", **kwargs) -> None:
        super().__init__(name=name, **kwargs)
        self.pad_id = pad_id
        self.total = self.add_weight(name="total", shape=(), initializer="zeros")

    def update_state(self, y_true: tf.Tensor, y_pred: Optional[tf.Tensor] = None, sample_weight=None):
        count = tf.reduce_sum(tf.cast(tf.not_equal(tf.cast(y_true, tf.int32), self.pad_id), tf.float32))
        return self.total.assign_add(count)

    def result(self) -> tf.Tensor:
        return tf.identity(self.total)

    def reset_state(self) -> None:
        self.total.assign(0.0)

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}


class MaskedAccuracy(keras.metrics.Metric):
    """Fraction of non-pad target tokens whose argmax prediction is correct.

    ``kernel``: ``"fused"`` takes the argmax with the C++ row kernel of the fused loss
    (:func:`tf_nmt.ops.xent.row_argmax`; TensorFlow's ArgMax over [B*T, V] logits cost about as
    much as the loss itself), ``"tf"`` with ``tf.argmax``, ``"auto"`` as the loss kernel.
    """

    def __init__(self, pad_id: int = PAD_ID, name: str = "accuracy", kernel: str = "tf",
                 **kwargs) -> None:
        super().__init__(name=name, **kwargs)
        self.pad_id = pad_id
        self.kernel = resolve_loss_kernel(kernel)
        self.correct = self.add_weight(name="correct", shape=(), initializer="zeros")
        self.count = self.add_weight(name="count", shape=(), initializer="zeros")

    def update_state(self, y_true: tf.Tensor, y_pred: tf.Tensor, sample_weight=None):
        y_true = tf.cast(y_true, tf.int32)
        weights = tf.cast(tf.not_equal(y_true, self.pad_id), tf.float32)
        if self.kernel == "fused":
            from tf_nmt.ops.xent import row_argmax

            vocab = tf.shape(y_pred)[-1]
            best = tf.reshape(row_argmax(tf.reshape(y_pred, [-1, vocab])), tf.shape(y_true))
        else:
            best = tf.argmax(y_pred, axis=-1, output_type=tf.int32)
        hits = tf.cast(tf.equal(best, y_true), tf.float32)
        self.correct.assign_add(tf.reduce_sum(hits * weights))
        return self.count.assign_add(tf.reduce_sum(weights))

    def result(self) -> tf.Tensor:
        return tf.math.divide_no_nan(self.correct, self.count)

    def reset_state(self) -> None:
        self.correct.assign(0.0)
        self.count.assign(0.0)

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id, "kernel": self.kernel}
