"""Which vector loops the C++ CPU kernels take: the one home of the instruction-set levels.

The row kernels (loss, row argmax, layer norm) have loops of three widths: 16 lanes of AVX-512
(F, DQ, BW, VL: every AVX-512 Xeon), 8 lanes of AVX2 + FMA (AMD Zen 1–3, Xeons before Skylake-SP)
and a scalar loop. Each kernel detects the CPU itself (``CpuSimdIsa`` in
``custom_ops/cc/kernels/bf16_simd.h``) and reads its own environment variable, e.g.
``TF_NMT_XENT_ISA=avx2``, as a cap, so tests and benchmarks can run the narrower loops on a wider
CPU. This module mirrors that choice for Python (kernel choice, tests, results files).
"""
from __future__ import annotations

import os

from tf_nmt.utils import machine

ISAS = ("scalar", "avx2", "avx512")  # narrowest first
# The CPU flags each vector width needs (Linux /proc/cpuinfo names).
ISA_FLAGS = {"avx2": ("avx2", "fma"), "avx512": ("avx512f", "avx512dq", "avx512bw", "avx512vl")}


def cpu_isa() -> str:
    """The widest loops this CPU runs, from its flags, as the kernels detect it."""
    flags = machine.cpu_flags()
    for isa in reversed(ISAS[1:]):
        if all(flag in flags for flag in ISA_FLAGS[isa]):
            return isa
    return "scalar"


def capped(env: str) -> str:
    """The loops a kernel whose cap is ``$env`` takes here: :func:`cpu_isa`, at most ``$env``.

    Raises ValueError for a value outside :data:`ISAS` (the kernels refuse it too)."""
    cap = os.environ.get(env, "") or ISAS[-1]
    if cap not in ISAS:
        raise ValueError(f"${env} must be one of {', '.join(ISAS)}, got {cap!r}")
    return ISAS[min(ISAS.index(cpu_isa()), ISAS.index(cap))]


def runnable() -> tuple:
    """The widths this CPU can run, narrowest first (what tests parametrise over)."""
    return ISAS[:ISAS.index(cpu_isa()) + 1]
