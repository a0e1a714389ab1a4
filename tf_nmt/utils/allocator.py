"""The memory allocator of ``tf-nmt`` processes: glibc malloc, or tcmalloc on request.

TensorFlow frees and re-allocates every activation of every step. Its large tensors (the
[batch, length, vocabulary] logits are ~130 MB) go through glibc's ``mmap``/``munmap`` on each
step, and every page of them is faulted in and zeroed by the kernel again (3x the page faults
of a tcmalloc process in a 40-step probe here). tcmalloc keeps freed memory for reuse.
Whether that makes training faster is measured by ``python -m experiments train-speed`` (the
``-tcmalloc`` variants, ``experiments/train_speed/results/train_speed.json``); it is not the default until it does.

The allocator must be chosen before the process starts, so with ``TF_NMT_ALLOCATOR=tcmalloc``
the ``tf-nmt`` command re-executes itself once with ``LD_PRELOAD`` set
(:func:`reexec_with_tcmalloc`; the process id does not change, so ``horovodrun`` and
``mpirun`` see the same workers). A missing library is then an error.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Mapping, MutableMapping, Optional, Sequence

ENV = "TF_NMT_ALLOCATOR"
CHOICES = ("system", "tcmalloc")
TCMALLOC_CANDIDATES = ("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
                       "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4",
                       "/usr/lib64/libtcmalloc_minimal.so.4", "/usr/lib64/libtcmalloc.so.4")
# tcmalloc prints a line per allocation above 1 GiB by default; TensorFlow makes such
# allocations routinely for large batches, so report only the truly huge ones.
QUIET = {"TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD": str(64 << 30)}


def tcmalloc_path() -> Optional[str]:
    """The installed tcmalloc library, or None."""
    return next((p for p in TCMALLOC_CANDIDATES if Path(p).is_file()), None)


def choice(env: Mapping[str, str]) -> str:
    """``TF_NMT_ALLOCATOR`` (default ``system``), checked."""
    value = env.get(ENV, "system").strip().lower() or "system"
    if value not in CHOICES:
        raise ValueError(f"{ENV}={env[ENV]!r}: use one of {', '.join(CHOICES)}")
    return value


def preloaded(env: Mapping[str, str]) -> bool:
    """Whether ``env`` already preloads a tcmalloc library."""
    return "tcmalloc" in env.get("LD_PRELOAD", "")


def with_tcmalloc(env: Mapping[str, str]) -> Optional[dict]:
    """A copy of ``env`` that preloads tcmalloc, or None when nothing is to change
    (``TF_NMT_ALLOCATOR`` unset or ``system``, or tcmalloc already preloaded)."""
    if choice(env) == "system" or preloaded(env):
        return None
    library = tcmalloc_path()
    if library is None:
        raise FileNotFoundError(f"{ENV}=tcmalloc but no tcmalloc library is installed (looked "
                                f"for {', '.join(TCMALLOC_CANDIDATES)}); on Debian/Ubuntu: "
                                "apt install libtcmalloc-minimal4")
    out = dict(env)
    out["LD_PRELOAD"] = ":".join(p for p in (library, env.get("LD_PRELOAD", "")) if p)
    for key, value in QUIET.items():
        out.setdefault(key, value)
    return out


def reexec_with_tcmalloc(argv: Sequence[str], environ: MutableMapping[str, str] = os.environ) -> None:
    """Replace this process by itself with tcmalloc preloaded (returns only when nothing is to
    change). Call before TensorFlow is imported; ``argv`` is the full original command line
    (``sys.orig_argv``)."""
    env = with_tcmalloc(environ)
    if env is None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, list(argv), env)
