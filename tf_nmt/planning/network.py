"""Named networks for the performance model: per-message latency alpha and link bandwidth beta.

The bandwidths are the nominal line rates; the latencies are typical one-way small-message MPI
latencies for each kind of link (TCP over Ethernet for the *bit presets, the PSM2 verbs layer for
Omni-Path). ``--alpha-us`` / ``--bandwidth-gbit`` override either value.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Dict, Optional

from tf_nmt.errors import UsageError


@dataclass(frozen=True)
class Network:
    """One link: ``alpha_s`` seconds per message, ``bandwidth_Bps`` bytes per second."""

    name: str
    alpha_s: float
    bandwidth_Bps: float

    def to_dict(self) -> Dict[str, object]:
        return asdict(self)


#: name -> (alpha in microseconds, bandwidth in Gbit/s)
PRESETS: Dict[str, tuple] = {
    "100mbit": (100.0, 0.1),
    "1gbit": (50.0, 1.0),
    "10gbit": (20.0, 10.0),
    "25gbit": (10.0, 25.0),
    "100gbit": (5.0, 100.0),
    "omnipath100": (1.5, 100.0),
}

#: within one node (shared memory between ranks of a node)
INTRA_NODE = (1.0, 400.0)


def network(name: str, alpha_us: Optional[float] = None,
            bandwidth_gbit: Optional[float] = None) -> Network:
    """The preset ``name`` with either value overridden (name ``custom``: both must be given)."""
    if name == "custom":
        if alpha_us is None or bandwidth_gbit is None:
            raise UsageError("--network custom needs both --alpha-us and --bandwidth-gbit")
        base = (alpha_us, bandwidth_gbit)
    elif name in PRESETS:
        base = PRESETS[name]
    else:
        raise UsageError(f"unknown network {name!r}: choose one of "
                         f"{', '.join([*PRESETS, 'custom'])}")
    alpha = base[0] if alpha_us is None else alpha_us
    gbit = base[1] if bandwidth_gbit is None else bandwidth_gbit
    if not alpha >= 0:
        raise UsageError(f"--alpha-us must be >= 0, got {alpha}")
    if not gbit > 0:
        raise UsageError(f"--bandwidth-gbit must be > 0, got {gbit}")
    return Network(name, alpha * 1e-6, gbit * 1e9 / 8)


def intra_node() -> Network:
    """The link between ranks of one node."""
    return Network("intra-node", INTRA_NODE[0] * 1e-6, INTRA_NODE[1] * 1e9 / 8)
