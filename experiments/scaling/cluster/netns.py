"""An emulated multi-host cluster on one Linux machine: network namespaces joined by a bridge.

Layout for ``n`` hosts and name prefix ``P`` (``P = tfnmtc-<tag>-``)::

    P br   (namespace)  bridge br0, ports p0 … p<n-1>
    P h<i> (namespace)  eth0 = 10.213.<tag-net>.<i+1>/24, the other end of port p<i>

Nothing is created in the root namespace: both ends of each veth pair are created directly in
their namespaces, the bridge lives in its own namespace, and the hosts have no route out, so
traffic can only flow between these namespaces. Each link is shaped in both directions with
``tc``: ``tbf`` for the rate (host → bridge on eth0, bridge → host on p<i>), and ``netem``
for the one-way delay when the kernel has it (some kernels ship without ``sch_netem``; a
delay is then refused with a clear error instead of being silently ignored).

Teardown deletes the namespaces (which deletes their veths and qdiscs); it is idempotent and
also removes leftovers of a crashed earlier run with the same prefix.
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import socket
import subprocess
import threading
from pathlib import Path
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence

ROOT_PREFIX = "tfnmtc-"
HOST_IFACE = "eth0"
_RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)$")
_DELAY_RE = re.compile(r"^(\d+(?:\.\d+)?)(us|ms|s)$")
_RATE_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
_DELAY_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
CLONE_NEWNET = 0x40000000
NETNS_ETC = Path("/etc/netns")


class NetnsError(RuntimeError):
    """Setting up or using the emulated cluster failed (with the command and its output)."""


def parse_rate(text: str) -> float:
    """``'100mbit'`` → 1e8 bits/s (tc's decimal units: bit, kbit, mbit, gbit)."""
    m = _RATE_RE.match(text.strip().lower())
    if not m:
        raise ValueError(f"bad rate {text!r}: use e.g. 100mbit, 1gbit, 10gbit")
    bits = float(m.group(1)) * _RATE_UNITS[m.group(2)]
    if bits <= 0:
        raise ValueError(f"rate must be positive, got {text!r}")
    return bits


def parse_delay(text: str) -> float:
    """``'0.5ms'`` → 5e-4 seconds (units us, ms, s; ``0`` means no delay)."""
    if text.strip() in ("0", ""):
        return 0.0
    m = _DELAY_RE.match(text.strip().lower())
    if not m:
        raise ValueError(f"bad delay {text!r}: use e.g. 0.1ms, 500us, 0")
    return float(m.group(1)) * _DELAY_UNITS[m.group(2)]


#: links slower than this get one-MTU packets and a 1 ms bucket (:attr:`LinkSpec.small_segments`)
SMALL_SEGMENTS_BELOW_BITS = 500e6
SMALL_SEGMENT_BYTES = 1500


@dataclass(frozen=True)
class LinkSpec:
    """One host's link to the switch: rate (tc units) and one-way delay added per direction."""

    rate: str = "1gbit"
    delay: str = "0"

    @property
    def rate_bits(self) -> float:
        return parse_rate(self.rate)

    @property
    def delay_seconds(self) -> float:
        return parse_delay(self.delay)

    @property
    def small_segments(self) -> bool:
        """Below :data:`SMALL_SEGMENTS_BELOW_BITS` the shaped devices hand tbf packets of one
        MTU (``gso_max_size``), so its bucket can be 1 ms of traffic. With 64 KiB
        segmentation-offload packets the bucket must hold two of them (or tbf drops them), and
        at 100 Mbit/s those 128 KiB are 10 ms of traffic: a message that size (GradDrop's
        allgather per step) went through unshaped, at 0.3-0.9 ms instead of 7 ms. Faster links
        keep the big packets: with one-MTU packets the veths' per-packet cost caps them near
        0.4 Gbit/s on this machine, and there 128 KiB is about 1 ms anyway."""
        return self.rate_bits < SMALL_SEGMENTS_BELOW_BITS

    def tbf_args(self) -> List[str]:
        """tbf parameters: the bucket holds ~1 ms of traffic (at least two of the packets the
        device hands it, so tbf does not drop them)."""
        floor = 4 * SMALL_SEGMENT_BYTES if self.small_segments else 131072
        burst = max(floor, int(self.rate_bits / 8 * 1e-3))
        return ["tbf", "rate", self.rate, "burst", str(burst), "latency", "20ms"]


def _run(cmd: Sequence[str], check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(cmd), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise NetnsError(f"`{' '.join(cmd)}` failed ({proc.returncode}): "
                         f"{proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def list_namespaces(prefix: str = ROOT_PREFIX) -> List[str]:
    """Names of the existing network namespaces that start with ``prefix``."""
    proc = _run(["ip", "netns", "list"], check=False)
    names = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    return sorted(n for n in names if n.startswith(prefix))


def remove_namespaces(prefix: str) -> List[str]:
    """Delete every namespace named ``prefix*`` and its ``/etc/netns`` files (idempotent);
    returns the namespaces removed."""
    if not prefix.startswith(ROOT_PREFIX):
        raise ValueError(f"refusing to delete namespaces outside {ROOT_PREFIX}*: {prefix!r}")
    removed = []
    for name in list_namespaces(prefix):
        if _run(["ip", "netns", "del", name], check=False).returncode == 0:
            removed.append(name)
    if NETNS_ETC.is_dir():
        for path in NETNS_ETC.glob(prefix + "*"):
            shutil.rmtree(path, ignore_errors=True)
        try:
            NETNS_ETC.rmdir()  # only when empty: other users' files stay
        except OSError:
            pass
    return removed


def hosts_file_for(address: str, names: Sequence[str], base: str) -> str:
    """``/etc/hosts`` for a namespace: ``base`` without lines naming ``names``, plus
    ``address names…``. ``ip netns exec`` bind-mounts ``/etc/netns/<ns>/hosts`` over /etc/hosts."""
    keep = [line for line in base.splitlines()
            if not set(line.split("#")[0].split()[1:]) & set(names)]
    return "\n".join(keep + [f"{address} {' '.join(names)}"]) + "\n"


def support_problem() -> Optional[str]:
    """Why namespaces cannot be used here (not root, no ``ip``), or None when they can."""
    if os.geteuid() != 0:
        return "needs root (ip netns add)"
    try:
        _run(["ip", "-V"])
        _run(["tc", "-V"], check=False)
    except (FileNotFoundError, NetnsError) as exc:
        return f"iproute2 missing: {exc}"
    return None


def qdisc_available(kind: str, prefix: str = ROOT_PREFIX + "probe-") -> bool:
    """Whether this kernel has the ``tc`` qdisc ``kind`` (probed on a scratch veth pair)."""
    ns = f"{prefix}{os.getpid()}"
    remove_namespaces(ns)
    try:
        _run(["ip", "netns", "add", ns])
        _run(["ip", "-n", ns, "link", "add", "name", "pa", "type", "veth", "peer", "name", "pb"])
        args = {"netem": ["netem", "delay", "1ms"], "tbf": LinkSpec("1gbit").tbf_args()}.get(kind, [kind])
        return _run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "pa", "root", *args],
                    check=False).returncode == 0
    finally:
        remove_namespaces(ns)


@dataclass
class EmulatedCluster:
    """``n`` emulated hosts behind one switch; use as a context manager (setup … teardown)."""

    n: int
    link: LinkSpec = field(default_factory=LinkSpec)
    tag: str = "main"
    subnet: int = 213

    def __post_init__(self) -> None:
        if not 1 <= self.n <= 250:
            raise ValueError(f"number of hosts must be in 1..250, got {self.n}")
        if not re.fullmatch(r"[a-z0-9]{1,8}", self.tag):
            raise ValueError(f"tag must be 1-8 lowercase letters/digits, got {self.tag!r}")
        self.link.rate_bits, self.link.delay_seconds  # validate early  # noqa: B018

    @property
    def prefix(self) -> str:
        return f"{ROOT_PREFIX}{self.tag}-"

    @property
    def bridge_ns(self) -> str:
        return f"{self.prefix}br"

    def host_ns(self, i: int) -> str:
        return f"{self.prefix}h{i}"

    @property
    def hosts(self) -> List[str]:
        return [self.host_ns(i) for i in range(self.n)]

    def address(self, i: int) -> str:
        """Host ``i``'s IPv4 address (a private range that exists only on this bridge)."""
        return f"10.{self.subnet}.{sum(map(ord, self.tag)) % 250}.{i + 1}"

    def exec_prefix(self, i: int) -> List[str]:
        """Command prefix that runs a program inside host ``i``'s namespace."""
        return ["ip", "netns", "exec", self.host_ns(i)]

    # -- lifecycle -----------------------------------------------------------------------------

    def setup(self) -> "EmulatedCluster":
        """Create the namespaces, bridge, veths, addresses and qdiscs (removing leftovers first)."""
        problem = support_problem()
        if problem:
            raise NetnsError(f"cannot build the emulated cluster: {problem}")
        if self.link.delay_seconds > 0 and not qdisc_available("netem"):
            raise NetnsError("this kernel has no netem qdisc (sch_netem), so a link delay cannot "
                             "be emulated; use --delay 0 (the rate is still shaped with tbf)")
        self.teardown()
        try:
            br = self.bridge_ns
            _run(["ip", "netns", "add", br])
            _run(["ip", "-n", br, "link", "add", "br0", "type", "bridge"])
            _run(["ip", "-n", br, "link", "set", "br0", "up"])
            for i, host in enumerate(self.hosts):
                _run(["ip", "netns", "add", host])
                _run(["ip", "-n", br, "link", "add", "name", f"p{i}", "type", "veth",
                      "peer", "name", HOST_IFACE, "netns", host])
                _run(["ip", "-n", br, "link", "set", f"p{i}", "master", "br0", "up"])
                _run(["ip", "-n", host, "addr", "add", f"{self.address(i)}/24", "dev", HOST_IFACE])
                _run(["ip", "-n", host, "link", "set", HOST_IFACE, "up"])
                _run(["ip", "-n", host, "link", "set", "lo", "up"])
                self._write_hosts(i)
                self._shape(host, HOST_IFACE)
                self._shape(br, f"p{i}")
        except BaseException:
            self.teardown()
            raise
        return self

    def _write_hosts(self, i: int) -> None:
        """Make this machine's hostname resolve to host ``i``'s address inside its namespace.

        Horovod 0.28.1 builds the Gloo device of its process sets without HOROVOD_GLOO_IFACE
        (it falls back to resolving ``gethostname()``), which here would give 127.0.0.1 and
        make ranks in different namespaces dial their own loopback.
        """
        base = Path("/etc/hosts").read_text() if Path("/etc/hosts").is_file() else ""
        text = hosts_file_for(self.address(i), [socket.gethostname(), self.host_ns(i)], base)
        target = NETNS_ETC / self.host_ns(i)
        target.mkdir(parents=True, exist_ok=True)
        (target / "hosts").write_text(text)

    def _shape(self, ns: str, dev: str) -> None:
        if self.link.small_segments:
            _run(["ip", "netns", "exec", ns, "ip", "link", "set", "dev", dev,
                  "gso_max_size", str(SMALL_SEGMENT_BYTES), "gso_max_segs", "1"])
        tc = ["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev]
        if self.link.delay_seconds > 0:
            _run(tc + ["root", "handle", "1:", "netem", "delay", self.link.delay])
            _run(tc + ["parent", "1:1", "handle", "10:", *self.link.tbf_args()])
        else:
            _run(tc + ["root", "handle", "1:", *self.link.tbf_args()])

    def teardown(self) -> List[str]:
        """Delete this cluster's namespaces (and leftovers with the same prefix). Idempotent."""
        return remove_namespaces(self.prefix)

    def __enter__(self) -> "EmulatedCluster":
        return self.setup()

    def __exit__(self, *exc) -> None:
        self.teardown()

    # -- inspection ----------------------------------------------------------------------------

    def link_bytes(self) -> Dict[str, int]:
        """Bytes each host has sent through its shaped link so far (tc -s counters on eth0)."""
        out = {}
        for host in self.hosts:
            text = _run(["ip", "netns", "exec", host, "tc", "-s", "qdisc", "show", "dev",
                         HOST_IFACE]).stdout
            m = re.search(r"Sent (\d+) bytes", text)
            out[host] = int(m.group(1)) if m else 0
        return out

    def describe(self) -> Dict[str, object]:
        """Settings for result files."""
        return {"hosts": self.n, "rate": self.link.rate, "rate_bits": self.link.rate_bits,
                "delay": self.link.delay, "bridge_ns": self.bridge_ns,
                "addresses": [self.address(i) for i in range(self.n)], "iface": HOST_IFACE,
                "shaping": ("netem+tbf" if self.link.delay_seconds > 0 else "tbf")}


@contextmanager
def entered(ns: str) -> Iterator[None]:
    """Run the body's socket creation in namespace ``ns`` (this thread only), then switch back.

    ``setns(CLONE_NEWNET)`` affects only the calling thread; sockets keep the namespace they
    were created in, so a server started here keeps listening inside ``ns`` afterwards.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open(f"/proc/self/task/{threading.get_native_id()}/ns/net", os.O_RDONLY)
    target = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            raise NetnsError(f"setns({ns}) failed: {os.strerror(ctypes.get_errno())}")
        try:
            yield
        finally:
            if libc.setns(own, CLONE_NEWNET) != 0:
                raise NetnsError(f"could not return from {ns}: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(target)
        os.close(own)
