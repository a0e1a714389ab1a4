"""The local parameter-server cluster's servers do not outlive a coordinator that was killed."""
import os
import signal
import subprocess
import sys
import time

import pytest

COORDINATOR = """
import os, sys, time
from tf_nmt.distributed.ps_cluster import LocalPSCluster
cluster = LocalPSCluster(num_workers=1)
print(" ".join(str(p.pid) for p in cluster._procs), flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie has exited
        return f.read().split(")")[-1].split()[0] != "Z"


@pytest.mark.slow
def test_servers_exit_when_their_coordinator_is_killed():
    servers = []
    coordinator = subprocess.Popen([sys.executable, "-c", COORDINATOR], stdout=subprocess.PIPE,
                                   text=True)
    try:
        servers += [int(p) for p in coordinator.stdout.readline().split()]
        assert len(servers) == 2 and all(alive(p) for p in servers)  # one worker, one ps
        coordinator.send_signal(signal.SIGKILL)  # no close(), no atexit
        coordinator.wait(timeout=30)
        deadline = time.monotonic() + 30
        while any(alive(p) for p in servers) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not any(alive(p) for p in servers)
    finally:
        coordinator.kill()
        for pid in servers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
