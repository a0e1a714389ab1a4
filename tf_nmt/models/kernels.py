"""Which implementation the training step's fusable pieces take: the C++ op or TensorFlow's.

Three config keys choose, each ``"auto"``, ``"fused"`` or ``"tf"``: ``train.loss_kernel`` (the
label-smoothed cross-entropy), ``train.dropout_kernel`` (seeded dropout) and
``train.norm_kernel`` (layer normalisation). :func:`resolve_kernel` turns a setting into
``"fused"`` or ``"tf"`` the same way for all three. Layers created inside :func:`use_kernels`
take the chosen kernels (:func:`current`); models built elsewhere (evaluation, export, tests)
get TensorFlow's and float32 logits, so SavedModels never need the custom-op library.
"""
from __future__ import annotations

import contextlib
from typing import Dict, Iterator, Optional, Tuple

from tf_nmt.compat import tf
from tf_nmt.config import ConfigError

KERNEL_SETTINGS = ("auto", "fused", "tf")
# Chosen per layer at build time. "loss" is the loss kernel the model's logits are made for: the
# fused one reads mixed precision's bfloat16 logits as they are, so the output projection then
# skips its cast to float32 (and the gradient's cast back).
LAYER_KERNELS = ("dropout", "norm", "loss")

_current: Dict[str, str] = {name: "tf" for name in LAYER_KERNELS}

# The CPUs (tf_nmt.ops.isa.cpu_isa) where ``auto`` takes each C++ op: those it has vector loops
# for (16-lane AVX-512 and 8-lane AVX2 + FMA for all three).
VECTOR_ISAS: Dict[str, tuple] = {"loss_kernel": ("avx2", "avx512"), "norm_kernel": ("avx2", "avx512"),
                                 "dropout_kernel": ("avx2", "avx512")}


def resolve_kernel(key: str, kernel: str = "auto", jit_compile: bool = False) -> str:
    """``"fused"`` or ``"tf"`` for the setting ``kernel`` of config key ``train.<key>``.

    ``auto`` takes the C++ op where it is fast: the custom-op library is built, no GPU is visible
    (the ops are CPU-only) and the CPU has the op's vector loops (:data:`VECTOR_ISAS`: AVX2 + FMA
    or AVX-512); XLA (``jit_compile``) cannot
    compile custom ops, so it takes ``tf`` there. ``fused`` asked for where it cannot run is a
    ConfigError, not a silent fallback. :func:`kernel_choice` also says why ``auto`` took ``tf``.
    """
    return kernel_choice(key, kernel, jit_compile)[0]


def kernel_choice(key: str, kernel: str = "auto", jit_compile: bool = False
                  ) -> Tuple[str, Optional[str]]:
    """(:func:`resolve_kernel`'s kernel, why ``auto`` fell back to ``tf``, else None)."""
    from tf_nmt.ops import isa
    from tf_nmt.ops.loader import BUILD_HINT, load_error, ops_available

    if kernel not in KERNEL_SETTINGS:
        raise ConfigError(f"train.{key} must be one of {KERNEL_SETTINGS}, got {kernel!r}")
    if kernel == "tf":
        return "tf", None
    if kernel == "fused":
        if jit_compile:
            raise ConfigError(f"train.{key}=fused is a custom op, which XLA cannot compile: use "
                              f"train.{key}=tf (or auto) with train.jit_compile=true")
        if not ops_available():
            raise ConfigError(f"train.{key}=fused needs the custom-op library. {BUILD_HINT}")
        return "fused", None
    if jit_compile:
        return "tf", "XLA (train.jit_compile) cannot compile custom ops"
    cpu = isa.cpu_isa()
    if cpu not in VECTOR_ISAS[key]:
        return "tf", f"the CPU has no vector loops for the op (ISA {cpu}; needs AVX2 + FMA or AVX-512)"
    error = load_error()
    if error is not None:
        return "tf", f"the op library failed to load: {' '.join(error.split())}"
    if tf.config.list_physical_devices("GPU"):
        return "tf", "a GPU is visible (the ops are CPU-only)"
    return "fused", None


@contextlib.contextmanager
def use_kernels(**kernels: str) -> Iterator[None]:
    """Layers built inside take the given resolved kernels, e.g. ``use_kernels(dropout="fused",
    norm="tf")``; the others keep theirs."""
    for name, kernel in kernels.items():
        if name not in LAYER_KERNELS:
            raise ValueError(f"no layer kernel {name!r} (use {', '.join(LAYER_KERNELS)})")
        if kernel not in ("fused", "tf"):
            raise ValueError(f"use_kernels takes resolved kernels, 'fused' or 'tf', not {kernel!r}")
    previous = dict(_current)
    _current.update(kernels)
    try:
        yield
    finally:
        _current.clear()
        _current.update(previous)


def current(name: str) -> str:
    """The kernel (``"fused"`` or ``"tf"``) that a ``name`` layer built now takes."""
    return _current[name]
