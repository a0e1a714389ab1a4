"""The C++ seeded dropout: one pass over the tensor each way, the keep mask regenerated from a
seed instead of stored (``custom_ops/cc/kernels/dropout_kernels.cc``).

Only the op call and its gradient live here; which dropout the models use is decided in
:func:`tf_nmt.models.dropout.resolve_dropout_kernel`. The kernel runs on the CPU, float32 and bfloat16
with AVX-512F/DQ 16 lanes at a time and a scalar loop elsewhere (half, other CPUs, or
``TF_NMT_DROPOUT_SCALAR=1``), with the same mask and values either way.
"""
from __future__ import annotations

from tf_nmt.compat import tf
from tf_nmt.ops.loader import load_ops

SCALAR_ENV = "TF_NMT_DROPOUT_SCALAR"


def seeded_dropout(x, rate: float, seed) -> tf.Tensor:
    """Inverted dropout of ``x`` whose mask is a function of ``seed`` and the flat index.

    Args:
        x: float32, bfloat16 or float16 tensor of any shape.
        rate: drop probability in ``[0, 1)``.
        seed: int64 scalar; the same seed gives the same mask for the same shape.

    Returns ``x / (1 - rate)`` where kept and 0 elsewhere; its gradient is the same op applied to
    the upstream gradient with the same seed.

    Example:
        >>> y = seeded_dropout(tf.ones([4, 8]), 0.1, tf.constant(7, tf.int64))
    """
    ops = load_ops()
    rate = float(rate)
    seed = tf.convert_to_tensor(seed, tf.int64)

    @tf.custom_gradient
    def drop(value):
        def grad(upstream):
            return ops.seeded_dropout(upstream, seed, rate=rate)

        return ops.seeded_dropout(value, seed, rate=rate), grad

    return drop(tf.convert_to_tensor(x))
