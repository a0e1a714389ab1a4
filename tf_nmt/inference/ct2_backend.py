"""CTranslate2's CPU backend switches, chosen in one place before ``ctranslate2`` is imported.

CTranslate2 reads two documented environment variables once per process: ``CT2_USE_MKL`` (Intel
MKL or oneDNN for the matrix products; by default MKL on Intel CPUs only) and
``CT2_FORCE_CPU_ISA`` (``GENERIC``, ``AVX``, ``AVX2``, ``AVX512``; by default the widest the CPU
has). :func:`import_ctranslate2` is the only import of the package in tf-nmt: it sets the two
variables first and remembers what it set, so a later request for other settings in the same
process is refused instead of silently ignored.

Each setting comes from, in order: the caller (``--ct2-mkl``/``--ct2-isa``), the user's
environment, the measured default for the CPU's vendor (:data:`VENDOR_DEFAULTS`), else
CTranslate2's own choice. The choice and where it came from is returned (and printed by
``tf-nmt translate``), never silent.
"""
from __future__ import annotations

import logging
import os
import platform
import re
import sys
import tempfile
from typing import Any, Callable, Dict, Optional, Tuple, TypeVar

from tf_nmt.errors import UserError

MKL_ENV, ISA_ENV = "CT2_USE_MKL", "CT2_FORCE_CPU_ISA"
ISAS = ("GENERIC", "AVX", "AVX2", "AVX512")
#: Measured defaults per CPU vendor (``/proc/cpuinfo``'s ``vendor_id``); a setting missing keeps
#: CTranslate2's own choice. On AMD, CTranslate2 4.8.5 picks AVX2 even where the CPU has
#: AVX-512; forcing AVX512 made int8 decoding 1.12-1.21x faster per core (float32 unchanged) on
#: a Zen 4 EPYC, and its MKL backend was 5x slower for int8 (0.85x for float32), so MKL stays off
#: (CTranslate2's default off Intel). See docs/serving.md.
VENDOR_DEFAULTS: Dict[str, Dict[str, str]] = {"AuthenticAMD": {ISA_ENV: "AVX512"}}
#: The CPU flags an ISA needs (a default ISA the CPU lacks is not applied).
ISA_FLAGS = {"AVX512": ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"),
             "AVX2": ("avx2", "fma"), "AVX": ("avx",)}

_applied: Optional[Dict[str, Any]] = None  # what the first import used
_system: Dict[str, str] = {}  # what CTranslate2 reported it selected (logged once a process)
#: CTranslate2's system configuration log lines (``log_system_config``) -> keys of :func:`selected`.
_SYSTEM_LINES = {"isa": re.compile(r"Selected ISA: (\S+)"),
                 "use_mkl": re.compile(r"Use Intel MKL: (\S+)"),
                 "sgemm": re.compile(r"SGEMM backend: (.+)$"),
                 "gemm_s8": re.compile(r"GEMM_S8 backend: (.+)$")}
T = TypeVar("T")


class CTranslate2BackendError(UserError, ValueError):
    """Backend settings CTranslate2 cannot honour (unknown ISA, or a change after import)."""


def cpu_vendor() -> str:
    """The CPU's vendor id (``GenuineIntel``, ``AuthenticAMD``...), ``unknown`` off Linux."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_flags() -> Tuple[str, ...]:
    """The CPU's feature flags (``/proc/cpuinfo``), empty where unreadable."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return tuple(line.split(":", 1)[1].split())
    except OSError:
        pass
    return ()


def _flag(value: Optional[bool]) -> Optional[str]:
    return None if value is None else ("1" if value else "0")


def resolve(use_mkl: Optional[bool] = None, cpu_isa: Optional[str] = None,
            environ: Optional[Dict[str, str]] = None, vendor: Optional[str] = None,
            flags: Optional[Tuple[str, ...]] = None) -> Dict[str, Any]:
    """The settings to use and where each came from (``given``, ``environment``,
    ``default for VENDOR``, ``ctranslate2``); nothing is set. A vendor default ISA is skipped
    where the CPU lacks its ``flags``."""
    environ = os.environ if environ is None else environ
    vendor = vendor or cpu_vendor()
    flags = cpu_flags() if flags is None else flags
    if cpu_isa is not None and cpu_isa.upper() not in ISAS:
        raise CTranslate2BackendError(f"unknown CPU ISA {cpu_isa!r}; CTranslate2 knows "
                                      f"{', '.join(ISAS)}")
    defaults = dict(VENDOR_DEFAULTS.get(vendor, {}))
    if not set(ISA_FLAGS.get(defaults.get(ISA_ENV, ""), ())) <= set(flags):
        defaults.pop(ISA_ENV)
    out: Dict[str, Any] = {"vendor": vendor}
    for key, env, given in (("use_mkl", MKL_ENV, _flag(use_mkl)),
                            ("cpu_isa", ISA_ENV, cpu_isa.upper() if cpu_isa else None)):
        if given is not None:
            value, source = given, "given"
        elif environ.get(env):
            value, source = environ[env], "environment"
        elif env in defaults:
            value, source = defaults[env], f"default for {vendor}"
        else:
            value, source = None, "ctranslate2"
        out[env] = value
        out[f"{env}_source"] = source
    return out


def import_ctranslate2(use_mkl: Optional[bool] = None, cpu_isa: Optional[str] = None):
    """``ctranslate2``, imported with the resolved backend settings (the first call decides for
    the process; a later call asking for different settings is an error)."""
    global _applied
    wanted = resolve(use_mkl, cpu_isa)
    if _applied is None:
        if "ctranslate2" in sys.modules:  # imported behind our back: report what it runs with
            wanted = resolve(environ=dict(os.environ))
            wanted["note"] = "ctranslate2 was imported before tf-nmt set its backend"
        else:
            for env in (MKL_ENV, ISA_ENV):
                if wanted[env] is not None:
                    os.environ[env] = wanted[env]
        try:
            import ctranslate2
        except ImportError as err:
            raise UserError("the ctranslate2 package is not installed: pip install "
                            "'tf-nmt[ctranslate2]' (ctranslate2==4.8.5)") from err
        _applied = wanted
        return ctranslate2
    asked = {env: wanted[env] for env in (MKL_ENV, ISA_ENV) if wanted[f"{env}_source"] == "given"}
    changed = {env: v for env, v in asked.items() if v != _applied[env]}
    if changed:
        now = ", ".join(f"{env}={_applied[env] or 'unset'}" for env in changed)
        raise CTranslate2BackendError(
            f"CTranslate2 was already loaded in this process with {now}; it reads its backend "
            "settings once, so ask for them before the first translator (or in a new process)")
    import ctranslate2
    return ctranslate2


def applied() -> Optional[Dict[str, Any]]:
    """The backend settings the process's ``ctranslate2`` was imported with (None: not yet)."""
    return None if _applied is None else dict(_applied)


def with_system_report(ctranslate2, create: Callable[[], T]) -> Tuple[T, Dict[str, str]]:
    """``create()`` (a translator) with CTranslate2's info log captured from file descriptor 2,
    and the ISA and GEMM backends it reports having selected (``isa``, ``use_mkl``, ``sgemm``,
    ``gemm_s8``; empty where it logged none). Other captured lines go back to stderr."""
    level = ctranslate2.get_log_level()
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            ctranslate2.set_log_level(logging.INFO)
            made = create()
        finally:
            ctranslate2.set_log_level(level)
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode("utf-8", errors="replace")
    other = []
    for line in text.splitlines():
        matched = False
        for key, pattern in _SYSTEM_LINES.items():
            found = pattern.search(line)
            if found:
                _system[key], matched = found.group(1).strip(), True
        if not matched and "[info]" not in line:
            other.append(line)
    if other:
        sys.stderr.write("\n".join(other) + "\n")
    return made, dict(_system)
