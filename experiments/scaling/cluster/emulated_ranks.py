"""Starting Horovod/Gloo ranks on an emulated cluster: one rank (or ``slots_per_host``) per
network namespace.

``horovodrun`` reaches remote hosts over ssh, which the namespaces do not run, so each rank is
started here with ``ip netns exec`` and the environment Horovod's Gloo launcher would give it,
and Horovod's own rendezvous (``RendezvousServer``) is served from inside host 0's namespace.
The rank environment and thread settings come from :func:`experiments.lib.launcher.worker_env`;
command lines for this machine or a real cluster from :mod:`experiments.lib.launcher`.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Mapping, Optional, Sequence

from experiments.lib.launcher import LaunchError, worker_env
from experiments.scaling.cluster.netns import HOST_IFACE, EmulatedCluster, entered


@dataclass
class RankResult:
    """How one rank of :func:`launch_emulated` ended, and where its output is."""

    rank: int
    host: str
    returncode: int
    log: Path


def launch_emulated(cluster: EmulatedCluster, command: Sequence[str], log_dir: Path,
                    slots_per_host: int = 1, env: Optional[Mapping[str, str]] = None,
                    timeout: float = 600.0) -> List[RankResult]:
    """Run ``command`` as ``n * slots_per_host`` Horovod/Gloo ranks, ``slots_per_host`` per
    namespace, and wait for all of them. Raises :class:`LaunchError` if any rank fails (the
    others are then terminated) or the job exceeds ``timeout`` seconds."""
    from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts  # noqa: PLC0415
    from horovod.runner.gloo_run import create_run_env_vars, create_slot_env_vars  # noqa: PLC0415
    from horovod.runner.http.http_server import RendezvousServer  # noqa: PLC0415

    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    hosts = parse_hosts(",".join(f"{h}:{slots_per_host}" for h in cluster.hosts))
    plan = get_host_assignments(hosts, cluster.n * slots_per_host)
    server = RendezvousServer()
    with entered(cluster.host_ns(0)):  # the server's socket lives in host 0's namespace
        port = server.start()
    server.init(plan)
    run_env = create_run_env_vars(cluster.address(0), [HOST_IFACE], port)
    procs: List[subprocess.Popen] = []
    logs: List[Path] = []
    try:
        for slot in plan:
            rank_env = dict(worker_env() if env is None else env)
            rank_env.update({k: str(v) for k, v in run_env.items()})
            rank_env.update(create_slot_env_vars(slot))
            host_index = cluster.hosts.index(slot.hostname)
            log = log_dir / f"rank{slot.rank}.log"
            logs.append(log)
            with open(log, "w") as fh:
                procs.append(subprocess.Popen(cluster.exec_prefix(host_index) + list(command),
                                              env=rank_env, stdout=fh, stderr=subprocess.STDOUT,
                                              start_new_session=True))
        _wait_all(procs, logs, timeout)
    finally:
        _terminate(procs)
        server.stop()
    return [RankResult(s.rank, s.hostname, p.returncode, log)
            for s, p, log in zip(plan, procs, logs)]


def _wait_all(procs: List[subprocess.Popen], logs: List[Path], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        codes = [p.poll() for p in procs]
        for rank, code in enumerate(codes):
            if code not in (None, 0):
                tail = logs[rank].read_text(errors="replace")[-3000:]
                raise LaunchError(f"rank {rank} exited with {code}; log {logs[rank]}:\n{tail}")
        if all(code == 0 for code in codes):
            return
        if time.monotonic() > deadline:
            raise LaunchError(f"ranks still running after {timeout:.0f} s (logs in {logs[0].parent})")
        time.sleep(0.2)


def _terminate(procs: List[subprocess.Popen]) -> None:
    """Stop the ranks we started (their own process groups), SIGTERM then SIGKILL."""
    alive = [p for p in procs if p.poll() is None]
    for p in alive:
        os.killpg(p.pid, signal.SIGTERM)
    for p in alive:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()

