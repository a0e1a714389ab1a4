"""What machine a measurement ran on: the one home of the ``machine`` record that results files
carry, and of reading the CPU's model and instruction-set flags.

Speed on these CPUs depends on a few flags more than on the core count: AVX2 and AVX-512 decide
which vector loops the C++ kernels take (8 or 16 lanes in the loss, dropout and layer norm), and
AMX whether mixed bfloat16 beats float32 (1.5x
faster with it, 0.66x without it on the same 2-core offer). So a results file names them, and a
user can see why their figures differ.
"""
from __future__ import annotations

import math
import os
import platform
from pathlib import Path
from typing import Any, Dict, FrozenSet, Optional, Union

CPUINFO = Path("/proc/cpuinfo")
# The flags that change which kernels run fast here, in the order they are reported.
ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")


CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")


def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _cgroup_paths(proc_cgroup: Path) -> Dict[str, str]:
    """This process's cgroup path per controller from ``/proc/self/cgroup`` ("" is cgroup v2's)."""
    paths: Dict[str, str] = {}
    for line in (_read(proc_cgroup) or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(","):
                paths.setdefault(controller, parts[2])
    return paths


def _ancestors(base: Path, relative: str) -> list:
    """``base/relative`` and each directory above it up to ``base`` (a quota on any applies)."""
    dirs = [base]
    current = base
    for part in [p for p in relative.split("/") if p]:
        current = current / part
        dirs.append(current)
    return dirs


def cgroup_cpu_limit(root: Union[str, Path, None] = None,
                     proc_cgroup: Union[str, Path, None] = None) -> Optional[float]:
    """The CPUs the cgroup quota allows this process (``quota / period``, the tightest over the
    process's cgroup and its parents), or None where no quota is set.

    Reads cgroup v2's ``cpu.max`` ("max 100000" or "150000 100000") and cgroup v1's
    ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (quota -1: none). A container or a Slurm job
    sees every host core in its affinity mask but may run only its quota's worth.
    """
    root = Path(root) if root is not None else CGROUP_ROOT
    paths = _cgroup_paths(Path(proc_cgroup) if proc_cgroup is not None else PROC_CGROUP)
    limits = []
    for directory in _ancestors(root, paths.get("", "")):  # cgroup v2
        fields = (_read(directory / "cpu.max") or "").split()
        if len(fields) == 2 and fields[0] != "max":
            try:
                quota, period = int(fields[0]), int(fields[1])
            except ValueError:
                continue
            if quota > 0 and period > 0:
                limits.append(quota / period)
    for mount in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):  # cgroup v1
        if not (root / mount).is_dir():
            continue
        for directory in _ancestors(root / mount, paths.get("cpu", "")):
            try:
                quota = int(_read(directory / "cpu.cfs_quota_us") or "-1")
                period = int(_read(directory / "cpu.cfs_period_us") or "0")
            except ValueError:
                continue
            if quota > 0 and period > 0:
                limits.append(quota / period)
        break
    return min(limits) if limits else None


def usable_cores(root: Union[str, Path, None] = None,
                 proc_cgroup: Union[str, Path, None] = None) -> int:
    """The cores this process may use: its CPU affinity mask (else ``os.cpu_count()``), capped
    by the cgroup CPU quota (:func:`cgroup_cpu_limit`), a fractional quota rounded up (1.5 CPUs
    keep 2 workers busy between them), at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    limit = cgroup_cpu_limit(root, proc_cgroup)
    if limit is not None:
        cores = min(cores, math.ceil(limit))
    return max(1, cores)


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
