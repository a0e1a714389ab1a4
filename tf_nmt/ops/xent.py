"""The C++ label-smoothed softmax cross-entropy: the training loss over [N, V] logits in one pass
forward and one backward (``custom_ops/cc/kernels/xent_kernels.cc``).

Only the op call and its gradient live here; which kernel the training loss uses is decided in
:func:`tf_nmt.models.losses.resolve_loss_kernel`. The kernels run on the CPU with the widest row
loops the CPU has (:func:`isa`): 16 lanes of AVX-512, 8 of AVX2 + FMA, or a scalar loop.
``TF_NMT_XENT_ISA`` (``scalar``, ``avx2`` or ``avx512``) caps the width, for tests and comparisons.
"""
from __future__ import annotations

from tf_nmt.compat import tf
from tf_nmt.ops import isa as simd
from tf_nmt.ops.loader import load_ops

ISA_ENV = "TF_NMT_XENT_ISA"  # caps the row loops: scalar, avx2 or avx512 (tf_nmt.ops.isa)


def isa() -> str:
    """The row loops the kernels take here: the CPU's widest, capped by ``$TF_NMT_XENT_ISA``
    (ValueError for a value outside :data:`tf_nmt.ops.isa.ISAS`)."""
    return simd.capped(ISA_ENV)


def simd_available() -> bool:
    """True when the kernels take vector (AVX2 or AVX-512) row loops here."""
    return isa() != "scalar"


def smoothed_softmax_xent(logits, labels, smoothing: float) -> tf.Tensor:
    """Per-row ``-sum_v q_v log softmax(logits)_v`` with ``q = (1 - eps) onehot + eps / V``.

    Args:
        logits: float32 or bfloat16 [N, V] (bfloat16 is read as float; other dtypes are cast to
            float32 first).
        labels: int32 [N], each in ``[0, V)`` (InvalidArgumentError otherwise).
        smoothing: ``eps`` in ``[0, 1)``.

    Returns float32 [N]; its gradient is ``upstream * (softmax - q)`` in the logits' dtype,
    computed in float by the gradient kernel from the forward's log-sum-exp in one pass over the
    logits.
    """
    ops = load_ops()
    labels = tf.convert_to_tensor(labels, tf.int32)
    smoothing = float(smoothing)

    @tf.custom_gradient
    def loss_fn(x):
        loss, logsumexp = ops.smoothed_softmax_xent(x, labels, smoothing=smoothing)

        def grad(upstream):
            return ops.smoothed_softmax_xent_grad(x, labels, logsumexp, upstream,
                                                  smoothing=smoothing)

        return loss, grad

    logits = tf.convert_to_tensor(logits)
    if logits.dtype not in (tf.float32, tf.bfloat16):
        logits = tf.cast(logits, tf.float32)
    return loss_fn(logits)


def row_argmax(logits) -> tf.Tensor:
    """int32 [N]: the index of each row's largest entry of float32 or bfloat16 ``logits`` [N, V]
    (the first one on ties, NaN entries ignored), as ``tf.argmax(logits, -1)``, in one vector
    pass: TensorFlow's ArgMax over the [B*T, 8000] logits took about as long as the fused loss.

    Example:
        >>> row_argmax(tf.constant([[0.1, 2.0, 2.0]])).numpy()
        array([1], dtype=int32)
    """
    logits = tf.convert_to_tensor(logits)
    if logits.dtype not in (tf.float32, tf.bfloat16):
        logits = tf.cast(logits, tf.float32)
    return load_ops().row_argmax(logits)
