"""Mixed-precision policy for the device a run trains on.

``train.mixed_precision`` asks for 16-bit compute. On the CPU (and on GPUs of compute capability
8.0 or later: A100, L4, H100, ...) that is ``mixed_bfloat16``, which needs no loss scaling. Older
GPUs (V100 7.0, T4 7.5) have no bfloat16 arithmetic worth using, so there it is
``mixed_float16``, whose narrow exponent range needs dynamic loss scaling: wrap the optimizer with
:func:`wrap_optimizer` (a ``LossScaleOptimizer``; a no-op for the other policies).

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

from typing import Iterable, Optional, Sequence, Tuple

from tf_nmt.compat import KERAS3, keras, tf

BF16_MIN_CAPABILITY = (8, 0)  # Ampere: first GPUs with bfloat16 tensor cores
POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


def gpu_compute_capabilities(devices: Optional[Iterable] = None) -> Sequence[Tuple[int, int]]:
    """Compute capability of each visible GPU (empty on a CPU-only machine)."""
    devices = tf.config.list_physical_devices("GPU") if devices is None else list(devices)
    caps = []
    for device in devices:
        details = tf.config.experimental.get_device_details(device) or {}
        cap = details.get("compute_capability")
        caps.append(tuple(cap) if cap else (0, 0))
    return caps


def policy_for_device(mixed_precision: bool = True,
                      capabilities: Optional[Sequence[Tuple[int, int]]] = None) -> str:
    """The Keras dtype policy name for this machine.

    ``float32`` unless ``mixed_precision``; ``mixed_bfloat16`` on a CPU-only machine or when every
    GPU has compute capability >= 8.0; otherwise ``mixed_float16`` (use :func:`wrap_optimizer`).
    ``capabilities`` overrides the detected GPUs (tests, or planning for another machine).
    """
    if not mixed_precision:
        return "float32"
    caps = gpu_compute_capabilities() if capabilities is None else list(capabilities)
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
