"""What a training run actually runs with, said once and recorded in its ``meta.json``.

``auto`` settings fall back quietly by design (the C++ ops to TensorFlow's where the library does
not load, the CPU lacks their vector loops, a GPU is visible or XLA compiles the step; bfloat16
to float16 on pre-Ampere GPUs). Each fallback is logged as one line when a run starts, and the
run's ``meta.json`` gets a ``runtime`` entry: the kernels used (``loss``/``dropout``/``norm``:
``fused`` or ``tf``, with the setting and why ``auto`` took ``tf``), the op library (path, loaded
or the load error, its build record) and the Keras dtype policy with how it was chosen. Each start
(and resume) rewrites ``runtime``; the entries of earlier starts move to ``runtime_history``.
:func:`tf_nmt.run_dir.check_resume` compares neither.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from tf_nmt.config import TrainConfig
from tf_nmt.models.kernels import kernel_choice
from tf_nmt.ops.loader import library_record
from tf_nmt.training import precision

KERNEL_NAMES = ("loss", "dropout", "norm")
HISTORY_LIMIT = 50  # earlier starts kept in runtime_history (an elastic run restarts often)


def resolve_kernels(t: TrainConfig) -> Dict[str, Tuple[str, Optional[str]]]:
    """``{"loss": (kernel, fallback reason or None), "dropout": ..., "norm": ...}``."""
    return {name: kernel_choice(f"{name}_kernel", getattr(t, f"{name}_kernel"), t.jit_compile)
            for name in KERNEL_NAMES}


def choose_policy(mixed_precision: precision.Setting) -> Tuple[str, Dict[str, Any]]:
    """(Keras dtype policy, its record) for ``train.mixed_precision`` (true, false or auto) on
    this machine (:func:`tf_nmt.training.precision.decide` and ``policy_for_device``): the record
    says what was asked, what was decided and why, and any warning."""
    caps = list(precision.gpu_compute_capabilities())
    flags = precision.cpu_flags()  # read once for the decision, the policy and the record
    decision = precision.decide(mixed_precision, caps, flags)
    policy = precision.policy_for_device(mixed_precision, caps, flags)
    asked = (mixed_precision if mixed_precision == precision.AUTO
             else str(bool(mixed_precision)).lower())
    record: Dict[str, Any] = {
        "policy": policy, "asked": f"train.mixed_precision={asked}", "reason": decision.reason,
        "device": ("cpu (no GPU visible)" if not caps else
                   "gpu compute capability " + ", ".join(f"{a}.{b}" for a, b in caps)),
        "cpu_native_bf16": list(precision.native_bf16_flags(flags))}
    if decision.warning:
        record["warning"] = decision.warning
    if policy == "mixed_float16":
        record["fallback"] = (f"bfloat16 needs compute capability >= "
                              f"{'.'.join(map(str, precision.BF16_MIN_CAPABILITY))} on every GPU: "
                              "float16 with dynamic loss scaling instead")
    return policy, record


def runtime_record(t: TrainConfig, kernels: Dict[str, str], fallbacks: Dict[str, str],
                   policy_record: Dict[str, Any], **extra: Any) -> Dict[str, Any]:
    """The ``runtime`` entry of ``meta.json`` (see the module doc); ``extra`` adds keys."""
    return {"started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "kernels": {name: {"setting": getattr(t, f"{name}_kernel"), "used": kernels[name],
                               **({"fallback": fallbacks[name]} if name in fallbacks else {})}
                        for name in KERNEL_NAMES},
            "op_library": library_record(), "precision": policy_record, **extra}


def fallback_lines(fallbacks: Dict[str, str], policy_record: Dict[str, Any]) -> List[str]:
    """One line per fallback cause (kernels that fell back for the same reason share one), the
    precision warning of an explicit ``true`` without native bfloat16, and what ``auto`` chose."""
    by_reason: Dict[str, List[str]] = {}
    for name, reason in fallbacks.items():
        by_reason.setdefault(reason, []).append(f"train.{name}_kernel")
    lines = [f"fallback: {', '.join(keys)}=auto run{'s' if len(keys) == 1 else ''} TensorFlow's "
             f"ops, not the C++ ops: {reason}" for reason, keys in by_reason.items()]
    if policy_record.get("fallback"):
        lines.append(f"fallback: {policy_record['asked']} runs {policy_record['policy']}: "
                     f"{policy_record['fallback']}")
    if policy_record.get("warning"):
        lines.append(f"warning: {policy_record['warning']}")
    if policy_record.get("asked", "").endswith("=auto"):
        lines.append(f"precision: {policy_record['asked']} runs {policy_record['policy']} "
                     f"({policy_record['reason']})")
    return lines


def log_fallbacks(fallbacks: Dict[str, str], policy_record: Dict[str, Any],
                  log: Callable[[str], None]) -> None:
    for line in fallback_lines(fallbacks, policy_record):
        log(line)


def with_runtime(meta: Dict[str, Any], saved: Optional[Dict[str, Any]],
                 runtime: Dict[str, Any]) -> Dict[str, Any]:
    """``meta`` plus ``runtime``, the saved meta's runtime moved to ``runtime_history``."""
    history = list((saved or {}).get("runtime_history", []))
    if saved and saved.get("runtime"):
        history.append(saved["runtime"])
    out = dict(meta, runtime=runtime)
    if history:
        out["runtime_history"] = history[-HISTORY_LIMIT:]
    return out
