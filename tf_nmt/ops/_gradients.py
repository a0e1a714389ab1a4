"""Gradient registrations: straight-through for quantise-dequantise, none for the rest."""
from tf_nmt.compat import tf


def _straight_through(op, grad_y, grad_scale):  # noqa: ARG001 - signature fixed by TF
    """d(decode(encode(x)))/dx := identity; bits get no gradient."""
    return [grad_y, None]


def register() -> None:
    """Registers once per process (TF raises on duplicates, so guard)."""
    if getattr(register, "done", False):
        return
    for kind in ("Log", "Fixed"):
        tf.RegisterGradient(f"{kind}QuantizeDequantize")(_straight_through)
        for suffix in ("QuantizeFit", "QuantizeEncode", "QuantizeDecode", "Quantize"):
            tf.no_gradient(f"{kind}{suffix}")
    for name in ("GradDrop", "GradDropGlobal", "OneBitQuantize", "PackNibbles", "UnpackNibbles",
                 "NmtLearningRate"):
        tf.no_gradient(name)
    register.done = True
