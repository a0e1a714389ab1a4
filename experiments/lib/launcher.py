"""Launching Horovod ranks: the one place that builds the ``horovodrun``/``mpirun`` command line
and the environment every rank gets (the study scripts, the scaling study and the tests use it).

Thread settings are decided here once: each rank gets ``threads`` OpenMP, intra-op and inter-op
threads (1 by default, so N ranks on a small machine do not fight over its cores more than they
must). Local ranks beyond the core count are fine (``-H localhost:N`` oversubscribes).

Nothing here assumes a source checkout: ranks run the installed package (``python -m tf_nmt``,
the ``tf-nmt`` entry point) or a script given by path, with the launching interpreter.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from horovod_patches.mpi_env import launch_env

CONTROLLERS = ("gloo", "mpi")
# What a rank needs from the launcher's environment; mpirun forwards exactly these (-x).
THREAD_VARS = ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")
FORWARDED_ENV = ("TF_CPP_MIN_LOG_LEVEL",) + THREAD_VARS


class LaunchError(RuntimeError):
    """A launched job failed or timed out (the message carries the tail of its output)."""


def worker_env(extra: Optional[Mapping[str, str]] = None, threads: int = 1,
               base: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The environment of every rank: ``base`` (default ``os.environ``) with Open MPI's
    run-as-root permission (:func:`horovod_patches.mpi_env.launch_env`), quiet TensorFlow logs,
    ``threads`` threads per rank (:data:`THREAD_VARS`), then ``extra`` on top."""
    if threads < 1:
        raise ValueError(f"threads per rank must be >= 1, got {threads}")
    env = launch_env(base)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.update({name: str(threads) for name in THREAD_VARS})
    env.update(extra or {})
    return env


def horovodrun_prefix(np: int, controller: str = "gloo", hosts: Optional[str] = None,
                      hostfile: Optional[str] = None, network_interface: Optional[str] = None,
                      python: Optional[str] = None) -> List[str]:
    """``horovodrun -np N`` on this machine (``-H localhost:N``), on ``hosts`` (``a:4,b:4``) or
    from a ``hostfile`` (``host slots=4`` lines), with ``--gloo`` or ``--mpi``. ``horovodrun``
    is the one installed next to ``python`` (default: this interpreter)."""
    if np < 1:
        raise ValueError(f"the number of ranks must be >= 1, got {np}")
    if controller not in CONTROLLERS:
        raise ValueError(f"unknown controller {controller!r}: use one of {CONTROLLERS}")
    if hosts and hostfile:
        raise ValueError("give hosts or a hostfile, not both")
    cmd = [str(Path(python or sys.executable).parent / "horovodrun"), "-np", str(np)]
    cmd += ["--hostfile", str(hostfile)] if hostfile else ["-H", hosts or f"localhost:{np}"]
    cmd.append(f"--{controller}")
    if network_interface:
        cmd += ["--network-interface", network_interface]
    return cmd


def horovodrun_command(np: int, command: Sequence[str], controller: str = "gloo",
                       hosts: Optional[str] = None, hostfile: Optional[str] = None,
                       network_interface: Optional[str] = None) -> List[str]:
    """:func:`horovodrun_prefix` followed by ``command`` (what each rank runs)."""
    return horovodrun_prefix(np, controller, hosts, hostfile, network_interface) + list(command)


def elastic_horovodrun_command(np: int, min_np: int, max_np: int, discovery_script: Path,
                               command: Sequence[str], network_interface: Optional[str] = None,
                               cooldown_seconds: Optional[Tuple[int, int]] = None,
                               elastic_timeout_s: Optional[int] = None) -> List[str]:
    """Elastic Gloo ``horovodrun``: start ``np`` workers on the hosts ``discovery_script`` prints
    (``host:slots`` lines), keep between ``min_np`` and ``max_np``; with ``cooldown_seconds``
    (lo, hi) a host whose worker failed is taken back after that cool-down instead of never.
    ``elastic_timeout_s`` bounds how long the driver waits for ``min_np`` workers after a change
    (Horovod's default is 600 s): past it the job fails instead of waiting."""
    if not 1 <= min_np <= np <= max_np:
        raise ValueError(f"need 1 <= min_np <= np <= max_np, got {min_np}, {np}, {max_np}")
    cmd = [str(Path(sys.executable).parent / "horovodrun"), "-np", str(np), "--min-np",
           str(min_np), "--max-np", str(max_np), "--host-discovery-script", str(discovery_script),
           "--gloo"]
    if network_interface:
        cmd += ["--network-interface", network_interface]
    if cooldown_seconds:
        cmd += ["--blacklist-cooldown-range", *(str(int(s)) for s in cooldown_seconds)]
    if elastic_timeout_s is not None:
        cmd += ["--elastic-timeout", str(int(elastic_timeout_s))]
    return cmd + list(command)


def mpirun_command(np: int, command: Sequence[str], hosts: Optional[str] = None,
                   hostfile: Optional[str] = None,
                   env_names: Sequence[str] = FORWARDED_ENV) -> List[str]:
    """Open MPI ``mpirun`` for ``np`` ranks (Horovod's MPI controller on a real cluster),
    forwarding ``env_names`` from the launcher's environment (see :func:`worker_env`)."""
    if hosts and hostfile:
        raise ValueError("give hosts or a hostfile, not both")
    cmd = ["mpirun", "-np", str(np), "--bind-to", "none", "--map-by", "slot"]
    if hostfile:
        cmd += ["--hostfile", str(hostfile)]
    elif hosts:
        cmd += ["-H", hosts]
    for name in env_names:
        cmd += ["-x", name]
    return cmd + list(command)


def run(script: Path, args: Sequence[str], np: int, controller: str = "gloo",
        env: Optional[Mapping[str, str]] = None, timeout: Optional[float] = 900, threads: int = 1,
        cwd: Optional[Path] = None) -> str:
    """Run ``python script args...`` as ``np`` local ranks under ``horovodrun`` with
    :func:`worker_env` (``env`` on top); return its stdout, or raise :class:`LaunchError` with
    the tail of its output when it fails (``timeout`` None: no limit)."""
    cmd = horovodrun_command(np, [sys.executable, str(script), *args], controller)
    proc = subprocess.run(cmd, cwd=cwd, env=worker_env(env, threads), capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode != 0:
        raise LaunchError(f"`{' '.join(cmd)}` failed with exit code {proc.returncode}:\n"
                          f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout
