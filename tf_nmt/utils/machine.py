"""What machine a measurement ran on: the one home of the ``machine`` record that results files
carry, and of reading the CPU's model and instruction-set flags.

Speed on these CPUs depends on a few flags more than on the core count: AVX2 and AVX-512 decide
which vector loops the C++ kernels take (8 or 16 lanes in the loss, dropout and layer norm), and
AMX whether mixed bfloat16 beats float32 (1.5x
faster with it, 0.66x without it on the same 2-core offer). So a results file names them, and a
user can see why their figures differ.
"""
from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any, Dict, FrozenSet, Optional, Union

CPUINFO = Path("/proc/cpuinfo")
# The flags that change which kernels run fast here, in the order they are reported.
ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), else ``os.cpu_count()``."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def cpu_fields(cpuinfo: Union[str, Path] = CPUINFO) -> Dict[str, str]:
    """The first processor's ``key: value`` fields of ``/proc/cpuinfo`` (empty where there is
    none: not Linux, or unreadable)."""
    fields: Dict[str, str] = {}
    try:
        with open(cpuinfo) as handle:
            for line in handle:
                if not line.strip():
                    if fields:
                        break
                    continue
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


def cpu_flags(cpuinfo: Union[str, Path] = CPUINFO) -> FrozenSet[str]:
    """The first processor's instruction-set flags (empty where ``/proc/cpuinfo`` is absent)."""
    return frozenset(cpu_fields(cpuinfo).get("flags", "").split())


def cpu_model(cpuinfo: Union[str, Path] = CPUINFO) -> str:
    """The CPU's model name with its family and model numbers (VMs often report a generic name,
    e.g. "Intel(R) Xeon(R) Processor", so the numbers tell the generations apart)."""
    fields = cpu_fields(cpuinfo)
    if not fields:
        return platform.processor() or platform.machine()
    return (f"{fields.get('model name', platform.machine())} (family {fields.get('cpu family', '?')}, "
            f"model {fields.get('model', '?')})")


def describe(cpuinfo: Union[str, Path] = CPUINFO, load: bool = False,
             load_before: Optional[list] = None) -> Dict[str, Any]:
    """The ``machine`` record of a results file: cores, OS, CPU model and the flags of
    :data:`ISA_FLAGS` it has.

    Args:
        cpuinfo: where to read the CPU's fields (tests pass a file).
        load: also record the load average now (``loadavg_after``).
        load_before: the load average taken before the measurement, recorded as given.

    Example:
        >>> describe()["isa"]  # doctest: +SKIP
        ['avx2', 'avx512f', 'avx512_vnni', 'avx512_bf16', 'amx_tile', 'amx_bf16', 'amx_int8']
    """
    flags = cpu_flags(cpuinfo)
    record: Dict[str, Any] = {"cpus": os.cpu_count(), "platform": platform.platform(),
                              "cpu": cpu_model(cpuinfo), "isa": [f for f in ISA_FLAGS if f in flags]}
    if load_before is not None:
        record["loadavg_before"] = load_before
    if load:
        record["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
    return record
