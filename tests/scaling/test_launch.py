"""Real Gloo ranks in emulated-cluster namespaces (command lines: tests/studies/test_launcher)."""
import json
import subprocess
import sys

import pytest

from experiments.lib.launcher import LaunchError
from experiments.scaling.cluster.emulated_ranks import launch_emulated
from experiments.scaling.cluster.netns import EmulatedCluster, LinkSpec, list_namespaces, support_problem
from tests.parallel.launch import horovod_importable

PROBLEM = support_problem()
needs_netns = pytest.mark.skipif(PROBLEM is not None, reason=f"network namespaces: {PROBLEM}")


@needs_netns
def test_failing_rank_stops_the_others_and_is_reported(tmp_path):
    cluster = EmulatedCluster(2, LinkSpec("1gbit"), tag="tfail")
    # rank 0 would sleep well past the launch's timeout; rank 1 fails at once
    command = ["sh", "-c", 'if [ "$HOROVOD_RANK" = 1 ]; then exit 3; fi; sleep 600']
    with cluster:
        # the failure is reported, not the timeout ("ranks still running"): no wait for rank 0
        with pytest.raises(LaunchError, match="rank 1 exited with 3"):
            launch_emulated(cluster, command, tmp_path / "logs", timeout=300)
        # and rank 0 was terminated, not left behind: no process is left in its namespace
        pids = subprocess.run(["ip", "netns", "pids", cluster.host_ns(0)], capture_output=True,
                              text=True, check=True).stdout.split()
        assert pids == []
    assert list_namespaces(cluster.prefix) == []


@needs_netns
def test_each_rank_gets_its_own_host_and_gloo_environment(tmp_path):
    with EmulatedCluster(2, LinkSpec("1gbit"), tag="tenv") as cluster:
        launch_emulated(cluster, ["sh", "-c", "env | grep ^HOROVOD_ | sort; ip -4 -o addr show eth0"],
                        tmp_path, timeout=60)
        logs = [(tmp_path / f"rank{r}.log").read_text() for r in (0, 1)]
        for rank, text in enumerate(logs):
            assert f"HOROVOD_RANK={rank}" in text and "HOROVOD_SIZE=2" in text
            assert f"HOROVOD_HOSTNAME={cluster.host_ns(rank)}" in text
            assert "HOROVOD_CROSS_SIZE=2" in text and "HOROVOD_LOCAL_SIZE=1" in text
            assert f"HOROVOD_GLOO_RENDEZVOUS_ADDR={cluster.address(0)}" in text
            assert "HOROVOD_GLOO_IFACE=eth0" in text
            assert cluster.address(rank) + "/24" in text


@needs_netns
@pytest.mark.parallel
@pytest.mark.skipif(not horovod_importable(), reason="Horovod is not installed")
def test_allreduce_crosses_the_shaped_link(tmp_path):
    """A 4 MB allreduce between two namespaces: the result is right, each host's tc counter
    shows the ring traffic, and at 100 Mbit/s the bus bandwidth stays under the link rate."""
    out = tmp_path / "r.json"
    with EmulatedCluster(2, LinkSpec("100mbit"), tag="tbench") as cluster:
        before = cluster.link_bytes()
        launch_emulated(cluster, [sys.executable, "-m", "experiments.scaling.cluster.linkbench", "--megabytes",
                                  "4", "--repeats", "2", "--out", str(out)], tmp_path / "logs",
                        timeout=240)
        after = cluster.link_bytes()
    result = json.loads(out.read_text())              # linkbench checks the allreduce sum itself
    assert result["world"] == 2 and result["bytes"] == 4_000_000
    for host, sent in after.items():
        # warm-up + 2 timed allreduces, each sends >= S bytes per rank on a 2-rank ring
        assert sent - before[host] >= 3 * 4_000_000
    assert result["bus_bandwidth_bits"] < 1.05e8
