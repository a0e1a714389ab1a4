"""Launching a Python script under ``horovodrun -np N`` on this machine (for the study scripts).

Local ranks beyond the core count are fine (``-H localhost:N`` oversubscribes); each worker gets
one intra-op thread so N workers do not fight over the cores more than they must.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

from horovod_patches.mpi_env import launch_env

REPO = Path(__file__).resolve().parents[2]
CONTROLLERS = ("gloo", "mpi")


def horovodrun_prefix(np: int, controller: str = "gloo",
                      python: Optional[str] = None) -> List[str]:
    """``horovodrun -np N -H localhost:N --<controller>`` (the environment's horovodrun)."""
    if np < 1:
        raise ValueError(f"the number of ranks must be >= 1, got {np}")
    if controller not in CONTROLLERS:
        raise ValueError(f"unknown controller {controller!r}: use one of {CONTROLLERS}")
    runner = Path(python or sys.executable).parent / "horovodrun"
    return [str(runner), "-np", str(np), "-H", f"localhost:{np}", f"--{controller}"]


def horovodrun_command(script: Path, args: Sequence[str], np: int, controller: str = "gloo",
                       python: Optional[str] = None) -> List[str]:
    """``horovodrun -np N -H localhost:N --<controller> python script args...``."""
    python = python or sys.executable
    return horovodrun_prefix(np, controller, python) + [python, str(script), *args]


def worker_env(extra: Optional[Mapping[str, str]] = None, threads: int = 1) -> Dict[str, str]:
    """Launcher environment: Keras 2, Open MPI root permission, the repository on PYTHONPATH."""
    env = launch_env()
    env["PYTHONPATH"] = str(REPO) + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["OMP_NUM_THREADS"] = env["TF_NUM_INTRAOP_THREADS"] = str(threads)
    env["TF_NUM_INTEROP_THREADS"] = str(threads)
    env.update(extra or {})
    return env


def run(script: Path, args: Sequence[str], np: int, controller: str = "gloo",
        env: Optional[Mapping[str, str]] = None, timeout: float = 900, threads: int = 1) -> str:
    """Run ``script`` on ``np`` ranks; return its output or raise RuntimeError with its tail."""
    cmd = horovodrun_command(script, args, np, controller)
    proc = subprocess.run(cmd, cwd=REPO, env=worker_env(env, threads), capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed with exit code {proc.returncode}:\n"
                           f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout
