"""The C++ fused layer normalisation over the last axis: one kernel forward and one backward
(``custom_ops/cc/kernels/layer_norm_kernels.cc``), in place of Keras's unfused path (moments,
batch_normalization and, under mixed bfloat16, two casts) that it takes for epsilon < 1.001e-5.

Only the op call and its gradient live here; which layer norm the models use is decided in
:func:`tf_nmt.models.layer_norm.resolve_norm_kernel`. The kernels run on the CPU, float32 and
bfloat16 (computed in float), with 16-lane AVX-512 or 8-lane AVX2 row loops where the CPU has
them and a scalar loop elsewhere; ``TF_NMT_LAYER_NORM_ISA`` (``scalar``, ``avx2`` or ``avx512``)
caps the width (tests and comparisons; see :mod:`tf_nmt.ops.isa`).
"""
from __future__ import annotations

from tf_nmt.compat import tf
from tf_nmt.ops.loader import load_ops

ISA_ENV = "TF_NMT_LAYER_NORM_ISA"  # caps the row loops (tf_nmt.ops.isa.capped)


def fused_layer_norm(x, gamma, beta, epsilon: float) -> tf.Tensor:
    """``(x - mean) / sqrt(variance + epsilon) * gamma + beta`` over the last axis of ``x``.

    Args:
        x: float32 or bfloat16 tensor of rank >= 1 (bfloat16 is normalised in float and rounded).
        gamma, beta: float32 [d], d = the last dimension of ``x``.
        epsilon: added to each row's variance, > 0.

    Returns a tensor of ``x``'s shape and dtype; gradients flow to ``x``, ``gamma`` and ``beta``
    (the backward kernel reuses the forward's per-row mean and 1/std).

    Example:
        >>> y = fused_layer_norm(tf.random.normal([8, 256]), tf.ones([256]), tf.zeros([256]), 1e-6)
    """
    ops = load_ops()
    epsilon = float(epsilon)

    @tf.custom_gradient
    def norm(value, scale, offset):
        y, mean, rstd = ops.fused_layer_norm(value, scale, offset, epsilon=epsilon)

        def grad(upstream):
            dx, dgamma, dbeta = ops.fused_layer_norm_grad(upstream, value, scale, mean, rstd)
            return dx, dgamma, dbeta

        return y, grad

    return norm(tf.convert_to_tensor(x), tf.convert_to_tensor(gamma, tf.float32),
                tf.convert_to_tensor(beta, tf.float32))
