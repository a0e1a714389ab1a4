"""The emulated cluster: argument parsing, and a real namespace set-up / traffic / teardown."""
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments.scaling.cluster import netns
from experiments.scaling.cluster.netns import (EmulatedCluster, LinkSpec, NetnsError, hosts_file_for,
                                  list_namespaces, parse_delay, parse_rate, qdisc_available,
                                  remove_namespaces, support_problem)

PROBLEM = support_problem()
needs_netns = pytest.mark.skipif(PROBLEM is not None, reason=f"network namespaces: {PROBLEM}")


def test_parse_rate_and_delay():
    assert parse_rate("100mbit") == 1e8
    assert parse_rate("10gbit") == 1e10
    assert parse_delay("0.5ms") == pytest.approx(5e-4)
    assert parse_delay("0") == 0.0
    for bad in ("fast", "10 gbps", "-1mbit"):
        with pytest.raises(ValueError):
            parse_rate(bad)
    with pytest.raises(ValueError):
        parse_delay("1 hour")


def test_tbf_burst_scales_with_rate():
    small = LinkSpec("100mbit").tbf_args()
    gbit = LinkSpec("1gbit").tbf_args()
    big = LinkSpec("10gbit").tbf_args()
    assert small[:3] == ["tbf", "rate", "100mbit"]
    assert int(small[small.index("burst") + 1]) == 12_500           # 1 ms: one-MTU packets
    assert LinkSpec("100mbit").small_segments and not LinkSpec("1gbit").small_segments
    assert int(gbit[gbit.index("burst") + 1]) == 131072             # floor: two 64 KiB packets
    assert int(big[big.index("burst") + 1]) == 1_250_000            # 1 ms at 10 Gbit/s


@needs_netns
def test_a_100mbit_link_shapes_a_small_message():
    # 88 kB (GradDrop's allgather per step on 2 hosts) at 100 Mbit/s is 7 ms on the wire; a
    # 128 KiB token bucket let it through in under 1 ms. Timed by the sender, to the receiver's
    # reply after the last byte (a busy machine only lengthens it)
    cluster = EmulatedCluster(2, LinkSpec("100mbit"), tag=f"s{__import__('os').getpid() % 10**6}")
    try:
        cluster.setup()
        server, port = _listen_in_host0(cluster)
        code = (f"import socket,time;s=socket.create_connection(('{cluster.address(0)}',{port}),"
                f"timeout=10);time.sleep(0.3);t=time.perf_counter();s.sendall(b'x'*88000);"
                f"s.recv(1);print(time.perf_counter()-t);s.close()")
        client = subprocess.Popen(cluster.exec_prefix(1) + [sys.executable, "-c", code],
                                  stdout=subprocess.PIPE, text=True)
        server.settimeout(20)
        conn, _ = server.accept()
        got = 0
        while got < 88000:
            chunk = conn.recv(65536)
            assert chunk, "the connection closed early"
            got += len(chunk)
        conn.sendall(b"k")
        took = float(client.communicate(timeout=20)[0])
        conn.close()
        server.close()
        assert client.returncode == 0
        assert 0.005 < took < 1.0, took
    finally:
        cluster.teardown()


def test_cluster_validates_arguments():
    with pytest.raises(ValueError):
        EmulatedCluster(0)
    with pytest.raises(ValueError):
        EmulatedCluster(2, tag="Bad-Tag")
    with pytest.raises(ValueError):
        EmulatedCluster(2, LinkSpec("lots"))
    with pytest.raises(ValueError, match="refusing"):
        remove_namespaces("other-")


def test_hosts_file_replaces_lines_naming_the_host():
    base = "127.0.0.1 localhost\n127.0.0.1 vm\n::1 ip6-localhost\n"
    text = hosts_file_for("10.213.1.2", ["vm", "tfnmtc-x-h1"], base)
    assert "127.0.0.1 vm" not in text
    assert "127.0.0.1 localhost" in text and "::1 ip6-localhost" in text
    assert text.splitlines()[-1] == "10.213.1.2 vm tfnmtc-x-h1"


def _listen_in_host0(cluster: EmulatedCluster):
    """A listening TCP socket created inside host 0's namespace, and its port."""
    with netns.entered(cluster.host_ns(0)):
        server = socket.socket()
        server.bind((cluster.address(0), 0))
        server.listen(1)
    return server, server.getsockname()[1]


def _echo_across(cluster: EmulatedCluster, payload: bytes) -> bytes:
    """A TCP echo: server socket created inside host 0's namespace, client run in host 1's."""
    server, port = _listen_in_host0(cluster)
    client_code = (f"import socket,sys;s=socket.create_connection(('{cluster.address(0)}',{port}),"
                   f"timeout=10);s.sendall(sys.stdin.buffer.read());s.shutdown(socket.SHUT_WR);"
                   f"b=b''\nwhile True:\n c=s.recv(65536)\n if not c: break\n b+=c\n"
                   f"sys.stdout.buffer.write(b)")
    client = subprocess.Popen(cluster.exec_prefix(1) + [sys.executable, "-c", client_code],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    client.stdin.write(payload)
    client.stdin.close()
    server.settimeout(20)
    conn, _ = server.accept()
    data = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    conn.sendall(data)
    conn.close()
    server.close()
    echoed = client.stdout.read()
    assert client.wait(timeout=20) == 0
    return echoed


@needs_netns
def test_two_hosts_talk_across_the_bridge_and_teardown_leaves_nothing():
    cluster = EmulatedCluster(2, LinkSpec("1gbit"), tag=f"t{__import__('os').getpid() % 10**6}")
    # a leftover of a "crashed" earlier run with the same prefix is removed by setup
    subprocess.run(["ip", "netns", "add", cluster.prefix + "stale"], check=True)
    try:
        cluster.setup()
        assert cluster.prefix + "stale" not in list_namespaces(cluster.prefix)
        assert set(list_namespaces(cluster.prefix)) == {cluster.bridge_ns, *cluster.hosts}
        before = cluster.link_bytes()
        payload = bytes(range(256)) * 4096                            # 1 MiB
        assert _echo_across(cluster, payload) == payload
        after = cluster.link_bytes()
        # both hosts' shaped links carried the megabyte (h1 -> h0, echoed h0 -> h1)
        for host in cluster.hosts:
            assert after[host] - before[host] >= len(payload)
        # the root namespace has no such interface: the address is not local here
        root_addrs = subprocess.run(["ip", "-4", "addr"], capture_output=True, text=True).stdout
        assert cluster.address(0) not in root_addrs
    finally:
        removed = cluster.teardown()
    assert set(removed) == {cluster.bridge_ns, *cluster.hosts}
    assert list_namespaces(cluster.prefix) == []
    assert not list(Path("/etc/netns").glob(cluster.prefix + "*")) if Path("/etc/netns").is_dir() else True
    assert cluster.teardown() == []                                  # idempotent


@needs_netns
def test_delay_without_netem_is_refused_clearly():
    if qdisc_available("netem"):
        pytest.skip("this kernel has netem: delays are supported")
    cluster = EmulatedCluster(2, LinkSpec("1gbit", "1ms"), tag="tdelay")
    with pytest.raises(NetnsError, match="netem"):
        cluster.setup()
    assert list_namespaces(cluster.prefix) == []
