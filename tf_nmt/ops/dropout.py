"""The C++ seeded dropout: one pass over the tensor each way, the keep mask regenerated from a
seed instead of stored (``custom_ops/cc/kernels/dropout_kernels.cc``).

Only the op call and its gradient live here; which dropout the models use is decided in
:func:`tf_nmt.models.dropout.resolve_dropout_kernel`. The kernel runs on the CPU: float32 and
bfloat16 take the widest loops the CPU has (:func:`isa`: 16 lanes of AVX-512, 8 of AVX2, or a
scalar loop; half always the scalar one), with the same mask and values bit for bit.
``TF_NMT_DROPOUT_ISA`` (``scalar``, ``avx2`` or ``avx512``) caps the width, for tests and
comparisons.
"""
from __future__ import annotations

from tf_nmt.compat import tf
from tf_nmt.ops import isa as simd
from tf_nmt.ops.loader import load_ops

ISA_ENV = "TF_NMT_DROPOUT_ISA"  # caps the vector loops: scalar, avx2 or avx512 (tf_nmt.ops.isa)


def isa() -> str:
    """The loops the kernel takes here for float32 and bfloat16: the CPU's widest, capped by
    ``$TF_NMT_DROPOUT_ISA`` (ValueError for a value outside :data:`tf_nmt.ops.isa.ISAS`)."""
    return simd.capped(ISA_ENV)


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
