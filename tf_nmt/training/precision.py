"""Mixed-precision policy for the device a run trains on.

``train.mixed_precision`` asks for 16-bit compute. On the CPU (and on GPUs of compute capability
8.0 or later: A100, L4, H100, ...) that is ``mixed_bfloat16``, which needs no loss scaling. Older
GPUs (V100 7.0, T4 7.5) have no bfloat16 arithmetic worth using, so there it is
``mixed_float16``, whose narrow exponent range needs dynamic loss scaling: wrap the optimizer with
:func:`wrap_optimizer` (a ``LossScaleOptimizer``; a no-op for the other policies).

``train.mixed_precision: auto`` (the presets' value) decides for the machine (:func:`decide`): on a
GPU, mixed; on a CPU, mixed bfloat16 only where the CPU computes bfloat16 natively (the
``avx512_bf16`` or ``amx_bf16`` flag), since elsewhere it is emulated and slower than float32
(measured: 1.5-1.7x faster with AMX or AVX512-BF16, 0.79x on an AVX2-only EPYC Zen 3;
experiments/train_speed/README.md). An explicit ``true`` on a CPU without native bfloat16 is
obeyed with a warning. The decision and its reason go into the run's ``meta.json``
(:func:`tf_nmt.training.runtime.choose_policy`).

Wiring (in the trainer's ``build_and_compile``): the policy is chosen once per model,
``policy_for_device(cfg.train.mixed_precision)`` unless the caller passes it as a value (the
quickstart's precision probe builds both policies from one config); it builds the model, and
``optimizer = wrap_optimizer(optimizer, policy, distributed)`` comes after the communication
wrapper (Horovod's DistributedOptimizer) and before ``model.compile``, so the loss scale is
outermost. On Keras 2 the scaled gradients are averaged, then unscaled and checked for overflow.
On Keras 3 each rank's gradients are checked first, the ranks agree on the answer (one scalar
allreduce), then they are unscaled and averaged, or the step is skipped on every rank.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Iterable, Optional, Sequence, Tuple, Union

from tf_nmt.compat import KERAS3, keras, tf
from tf_nmt.utils.machine import cpu_flags

BF16_MIN_CAPABILITY = (8, 0)  # Ampere: first GPUs with bfloat16 tensor cores
POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")
# The CPU flags of native bfloat16 arithmetic: AVX512-BF16 dot products, AMX tiles.
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
AUTO = "auto"
Setting = Union[bool, str]  # train.mixed_precision: True, False or "auto"


@dataclass(frozen=True)
class PrecisionDecision:
    """What ``train.mixed_precision`` comes to on this machine: ``mixed`` or float32, why, and a
    warning where an explicit ``true`` will likely be slower than float32."""

    mixed: bool
    reason: str
    warning: Optional[str] = None


def native_bf16_flags(flags: Optional[AbstractSet[str]] = None) -> Tuple[str, ...]:
    """The flags of :data:`NATIVE_BF16_FLAGS` this CPU has (``flags``: instead of the CPU's)."""
    flags = cpu_flags() if flags is None else flags
    return tuple(f for f in NATIVE_BF16_FLAGS if f in flags)


def decide(setting: Setting, capabilities: Optional[Sequence[Tuple[int, int]]] = None,
           flags: Optional[AbstractSet[str]] = None) -> PrecisionDecision:
    """Resolve ``train.mixed_precision`` (True, False or ``"auto"``) for this machine
    (``capabilities``: GPUs' compute capabilities, ``flags``: CPU flags; None: detected)."""
    if setting not in (True, False, AUTO):
        raise ValueError(f"train.mixed_precision must be true, false or auto, got {setting!r}")
    if setting != AUTO and not setting:
        return PrecisionDecision(False, "asked: float32")
    caps = gpu_compute_capabilities() if capabilities is None else list(capabilities)
    if caps:
        return PrecisionDecision(True, "asked" if setting != AUTO else
                                 "auto: a GPU is visible (16-bit tensor cores)")
    native = native_bf16_flags(flags)
    if native:
        return PrecisionDecision(True, ("asked" if setting != AUTO else "auto") +
                                 f": the CPU computes bfloat16 natively ({', '.join(native)})")
    lacking = f"the CPU has no native bfloat16 ({' or '.join(NATIVE_BF16_FLAGS)})"
    if setting == AUTO:
        return PrecisionDecision(False, f"auto: {lacking}, so bfloat16 would be emulated and "
                                        "slower than float32")
    return PrecisionDecision(True, "asked", warning=(
        f"train.mixed_precision=true: {lacking}; bfloat16 is emulated and usually slower than "
        "float32 here (0.79x measured on an AVX2 CPU): use auto or false"))


def gpu_compute_capabilities(devices: Optional[Iterable] = None) -> Sequence[Tuple[int, int]]:
    """Compute capability of each visible GPU (empty on a CPU-only machine)."""
    devices = tf.config.list_physical_devices("GPU") if devices is None else list(devices)
    caps = []
    for device in devices:
        details = tf.config.experimental.get_device_details(device) or {}
        cap = details.get("compute_capability")
        caps.append(tuple(cap) if cap else (0, 0))
    return caps


def policy_for_device(mixed_precision: Setting = True,
                      capabilities: Optional[Sequence[Tuple[int, int]]] = None,
                      flags: Optional[AbstractSet[str]] = None) -> str:
    """The Keras dtype policy name for this machine.

    ``float32`` unless ``mixed_precision`` (``auto``: :func:`decide`); ``mixed_bfloat16`` on a
    CPU-only machine or when every GPU has compute capability >= 8.0; otherwise
    ``mixed_float16`` (use :func:`wrap_optimizer`). ``capabilities`` and ``flags`` override the
    detected GPUs and CPU flags (tests, or planning for another machine).
    """
    caps = gpu_compute_capabilities() if capabilities is None else list(capabilities)
    if not decide(mixed_precision, caps, flags).mixed:
        return "float32"
    if not caps or all(tuple(c) >= BF16_MIN_CAPABILITY for c in caps):
        return "mixed_bfloat16"
    return "mixed_float16"


def needs_loss_scaling(policy: str) -> bool:
    """float16 compute needs dynamic loss scaling; bfloat16 and float32 do not."""
    if policy not in POLICIES:
        raise ValueError(f"unknown dtype policy {policy!r}; choose from {POLICIES}")
    return policy == "mixed_float16"


def wrap_optimizer(optimizer, policy: str, distributed: bool = False):
    """``optimizer`` in a dynamic ``LossScaleOptimizer`` when ``policy`` needs it, else unchanged.

    ``distributed`` (several Horovod ranks): on Keras 3 the loss scale is
    :class:`horovod_patches.keras3.LossScaleOptimizer`, whose overflow check is one answer for all
    ranks. Keras 3's own checks this rank's gradients before the inner optimizer's allreduce, so
    a rank that overflowed alone would skip it and deadlock the job. It also counts a skipped step
    in ``iterations``, as tf_keras does (the resumed run's data skip counts batches). Keras 2's
    averages the scaled gradients before its check (module docstring), so it needs no change.
    """
    if not needs_loss_scaling(policy):
        return optimizer
    if KERAS3:  # Keras 3's is always dynamic
        if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
            return optimizer
        if distributed:
            from horovod_patches.keras3 import LossScaleOptimizer  # noqa: PLC0415 - needs Horovod

            return LossScaleOptimizer(optimizer, count_skipped_steps=True)
        return keras.optimizers.LossScaleOptimizer(optimizer)
    if isinstance(optimizer, keras.mixed_precision.LossScaleOptimizer):
        return optimizer
    return keras.mixed_precision.LossScaleOptimizer(optimizer, dynamic=True)
