"""A local TensorFlow parameter-server cluster: worker and ps ``tf.distribute.Server`` processes
on 127.0.0.1 ports, and the ``ParameterServerStrategy`` + ``ClusterCoordinator`` driving them.

The servers run as child processes of the installed package
(``python -m tf_nmt.distributed.ps_cluster JOB INDEX SPEC``):
with several workers inside the coordinator's own process the scheduled functions hang here.
Only loopback addresses are used; :meth:`LocalPSCluster.close` ends exactly the processes it
started, and a server whose parent dies without closing it (killed, or a crash) exits too.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Dict, List

LOOPBACK = "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"parameter-server cluster process exited with {proc.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex((LOOPBACK, port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"no server listening on {LOOPBACK}:{port} after {timeout:.0f} s")


class LocalPSCluster:
    """``num_workers`` worker and ``num_ps`` ps servers on loopback ports (a context manager)."""

    def __init__(self, num_workers: int, num_ps: int = 1, start_timeout: float = 180.0) -> None:
        if num_workers < 1 or num_ps < 1:
            raise ValueError("a parameter-server cluster needs >= 1 worker and >= 1 ps")
        self.spec: Dict[str, List[str]] = {
            "worker": [f"{LOOPBACK}:{_free_port()}" for _ in range(num_workers)],
            "ps": [f"{LOOPBACK}:{_free_port()}" for _ in range(num_ps)]}
        self._procs: List[subprocess.Popen] = []
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
        try:
            for job, addresses in self.spec.items():
                for index, address in enumerate(addresses):
                    proc = subprocess.Popen(
                        [sys.executable, "-m", "tf_nmt.distributed.ps_cluster", job, str(index),
                         json.dumps(self.spec), str(os.getpid())],
                        env=env, stdout=subprocess.DEVNULL)
                    self._procs.append(proc)
                    _wait_for_port(int(address.rsplit(":", 1)[1]), proc, start_timeout)
            self.strategy, self.coordinator = self._connect()
        except BaseException:
            self.close()
            raise

    def _connect(self):
        from tf_nmt.compat import tf

        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(self.spec), rpc_layer="grpc")
        strategy = tf.distribute.ParameterServerStrategy(resolver)
        return strategy, tf.distribute.coordinator.ClusterCoordinator(strategy)

    def close(self) -> None:
        """Stop the server processes this cluster started (by their pids)."""
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
        for proc in self._procs:
            proc.wait(timeout=30)
        self._procs = []

    def __enter__(self) -> "LocalPSCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _exit_with_parent(parent: int, every: float = 1.0) -> None:
    """Exit this server once ``parent`` is gone (it is re-parented): a coordinator killed with
    SIGKILL cannot close its cluster, and its servers would otherwise run on, holding ports."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _serve(job: str, index: int, spec: Dict[str, List[str]], parent: int) -> None:
    _exit_with_parent(parent)
    from tf_nmt.compat import tf
    from tf_nmt.ops.loader import ops_available

    # Functions the coordinator sends run here: register the custom ops they may use (the fused
    # loss of train.loss_kernel), where the library is built.
    ops_available()

    server = tf.distribute.Server(tf.train.ClusterSpec(spec), job_name=job, task_index=index,
                                  protocol="grpc", start=True)
    server.join()


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4]))
