"""The alpha-beta model of one training step on N ranks.

Collectives (per rank, ring algorithms; alpha latency, beta bandwidth):

* allreduce of ``b`` bytes over N ranks: ``2 (N-1)/N * b / beta + 2 (N-1) alpha``;
* allgather where the ranks' slices total ``t`` bytes: ``(N-1)/N * t / beta + (N-1) alpha``;
* hierarchical when ``r`` ranks share each of M nodes (Horovod's hierarchical allreduce): a
  reduce-scatter among a node's ranks, an allreduce among the nodes (the r node-local rings share
  the node's link, so the link carries the whole tensor), then an allgather within the node.

Horovod's tensor fusion packs the gradients into buffers of ``fusion_bytes`` (HOROVOD_FUSION_THRESHOLD);
each buffer is one collective and waits for one cycle (HOROVOD_CYCLE_TIME). The fusion default is
Horovod's since 0.21 (128 MiB, its changelog, PR 2468; the tensor-fusion page still says 64 MB);
the cycle's is tf-nmt's (10 ms, :data:`tf_nmt.distributed.context.DEFAULT_CYCLE_TIME_MS`, which
``tf-nmt train`` sets unless the launcher gives one; Horovod's own is 1 ms). The exchange overlaps the backward pass: ``overlap`` is the fraction of the
backward time (``BACKWARD_SHARE`` of the compute) that can hide exchange. A request reaches
Horovod's background loop at a random phase of its cycle, so a fusion round waits half a cycle on
average (``Horovod.cycle_wait``; a lone collective issued back to back, as in a link bench, waits a
whole one).

The exchange's own CPU work (:class:`Cpu`, constants probed by :mod:`tf_nmt.planning.probe`):
the ring allreduce's reduction, ``(N-1)/N * b * gamma`` (the alpha-beta-gamma model; gamma is
seconds per byte of an element-wise float32 add), two copies of ``b`` through Horovod's fusion
buffer (``copy_s_per_byte``), and graddrop's selection, encoding, decoding and scatter
(``graddrop_s_per_entry`` per gradient entry). Where ``R`` ranks share ``C`` cores this work takes
``max(1, R / C)`` times longer (``Cpu.sharing``); GradDrop's, which streams the gradient and
its residual through memory, ``max(1, R / P)`` with ``P`` the ranks whose exchanges the node
runs at once at full speed (``Cpu.graddrop_parallel``, measured; default ``C``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Dict, List, Optional, Sequence

from tf_nmt.distributed.context import DEFAULT_CYCLE_TIME_MS
from tf_nmt.errors import UsageError
from tf_nmt.planning.network import Network, intra_node

#: backward's share of a forward+backward+update step (backward costs about twice the forward)
BACKWARD_SHARE = 2.0 / 3.0
FUSION_BYTES = 128 * 1024 * 1024
CYCLE_S = DEFAULT_CYCLE_TIME_MS / 1e3


def ring_allreduce_s(nbytes: float, ranks: int, net: Network) -> float:
    """Seconds of one ring allreduce of ``nbytes`` over ``ranks`` ranks."""
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    return 2.0 * (ranks - 1) / ranks * nbytes / net.bandwidth_Bps + 2 * (ranks - 1) * net.alpha_s


def ring_allgather_s(total_bytes: float, ranks: int, net: Network) -> float:
    """Seconds of one ring allgather whose slices total ``total_bytes``."""
    if ranks <= 1 or total_bytes <= 0:
        return 0.0
    return (ranks - 1) / ranks * total_bytes / net.bandwidth_Bps + (ranks - 1) * net.alpha_s


def allreduce_s(nbytes: float, nodes: int, ranks_per_node: int, net: Network,
                intra: Optional[Network] = None) -> float:
    """Allreduce over ``nodes`` x ``ranks_per_node`` ranks (hierarchical when they share nodes)."""
    if ranks_per_node == 1:
        return ring_allreduce_s(nbytes, nodes, net)
    intra = intra or intra_node()
    r = ranks_per_node
    inside = ring_allreduce_s(nbytes, r, intra)  # reduce-scatter + allgather within the node
    return inside + ring_allreduce_s(nbytes, nodes, net)


def allgather_s(slice_bytes: float, nodes: int, ranks_per_node: int, net: Network,
                intra: Optional[Network] = None) -> float:
    """Allgather of one ``slice_bytes`` slice per rank over all ranks."""
    ranks = nodes * ranks_per_node
    total = slice_bytes * ranks
    if ranks_per_node == 1:
        return ring_allgather_s(total, nodes, net)
    intra = intra or intra_node()
    return (ring_allgather_s(slice_bytes * ranks_per_node, ranks_per_node, intra)
            + ring_allgather_s(total, nodes, net) + _bcast_s(total, ranks_per_node, intra))


def _bcast_s(nbytes: float, ranks: int, net: Network) -> float:
    """The gathered buffer passed on within a node (pipelined ring broadcast)."""
    if ranks <= 1:
        return 0.0
    return nbytes / net.bandwidth_Bps + (ranks - 1) * net.alpha_s


@dataclass(frozen=True)
class StepBytes:
    """What one rank hands to the collectives per optimizer step, by kind (bytes)."""

    allreduce: float = 0.0        # dense tensors allreduced every step
    allgather_slice: float = 0.0  # this rank's slice of an allgather every step
    periodic: float = 0.0         # a parameter average every ``period`` steps
    period: int = 1
    slice_follows_batch: bool = True  # dense mode's embedding rows; graddrop's pairs do not
    graddrop_entries: float = 0.0  # gradient entries graddrop selects from (its CPU work)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Horovod:
    """Tensor fusion, cycle time (``cycle_wait`` of a cycle waited per fusion round) and
    overlap with backward."""

    fusion_bytes: float = FUSION_BYTES
    cycle_s: float = CYCLE_S
    overlap: float = 0.5
    cycle_wait: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= self.overlap <= 1.0:
            raise UsageError(f"--overlap must be in [0, 1], got {self.overlap}")
        if not self.fusion_bytes > 0:
            raise UsageError(f"--fusion-mb must be > 0, got {self.fusion_bytes / 2**20}")
        if not self.cycle_s >= 0:
            raise UsageError(f"--cycle-ms must be >= 0, got {self.cycle_s * 1e3}")
        if not 0.0 <= self.cycle_wait <= 1.0:
            raise UsageError(f"cycle_wait must be in [0, 1], got {self.cycle_wait}")


#: the 2-core development host's probe (experiments/planning/results/validate.json ``cpu_probe``,
#: rounded): an element-wise float32 add of 5.5 MB, a 5.5 MB copy, GradDrop's exchange of the
#: 1,363,776-entry validation model; ``tf-nmt plan --probe`` measures a target node's
GAMMA_S_PER_BYTE = 0.29e-9
COPY_S_PER_BYTE = 0.072e-9
GRADDROP_S_PER_ENTRY = 4.0e-9


@dataclass(frozen=True)
class Cpu:
    """The exchange's CPU work per byte or entry on one rank, and the node's cores (None: at
    least a core per rank). ``graddrop_parallel``: how many ranks' GradDrop exchanges the node
    runs at once at full speed (None: its cores). GradDrop's selection streams the whole
    gradient and its residual through memory, so where the ranks share the memory bandwidth
    this can be fewer than the cores (measured on the 2-core development host: 1.05)."""

    gamma_s_per_byte: float = GAMMA_S_PER_BYTE
    copy_s_per_byte: float = COPY_S_PER_BYTE
    graddrop_s_per_entry: float = GRADDROP_S_PER_ENTRY
    cores_per_node: Optional[int] = None
    graddrop_parallel: Optional[float] = None

    def __post_init__(self) -> None:
        for name in ("gamma_s_per_byte", "copy_s_per_byte", "graddrop_s_per_entry"):
            if not getattr(self, name) >= 0:
                raise UsageError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.cores_per_node is not None and self.cores_per_node < 1:
            raise UsageError(f"--cores-per-node must be >= 1, got {self.cores_per_node}")
        if self.graddrop_parallel is not None:
            if self.cores_per_node is None:
                raise UsageError("--graddrop-parallel needs --cores-per-node (without it every "
                                 "rank has a core of its own and nothing is shared)")
            if not self.graddrop_parallel > 0:
                raise UsageError(f"--graddrop-parallel must be > 0, got {self.graddrop_parallel}")

    def sharing(self, ranks_on_cores: int, parallel: Optional[float] = None) -> float:
        """How much longer CPU-bound work takes when ``ranks_on_cores`` ranks share a node that
        runs ``parallel`` of them at once at full speed (default: its cores)."""
        if self.cores_per_node is None:
            return 1.0
        return max(1.0, ranks_on_cores / (parallel or self.cores_per_node))

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


#: no CPU terms (the alpha-beta model alone)
NO_CPU = Cpu(0.0, 0.0, 0.0)


def allreduce_cpu_s(nbytes: float, ranks: int, cpu: Cpu) -> float:
    """CPU seconds of one ring allreduce of ``nbytes`` on one rank: the reduction (``(N-1)/N``
    of the tensor added once) and the copies into and out of the fusion buffer."""
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    return (ranks - 1) / ranks * nbytes * cpu.gamma_s_per_byte + 2 * nbytes * cpu.copy_s_per_byte


def exchange_s(step: StepBytes, nodes: int, ranks_per_node: int, net: Network,
               hvd: Horovod = Horovod(), cpu: Cpu = NO_CPU, sharing_ranks: Optional[int] = None
               ) -> float:
    """Seconds of one step's gradient exchange (not counting overlap): wire, cycle waits and
    the CPU work of ``cpu``, slowed by ``cpu.sharing`` of ``sharing_ranks`` (default: the ranks
    of a node) sharing its cores."""
    ranks = nodes * ranks_per_node
    if ranks <= 1:
        return 0.0
    wait = hvd.cycle_wait * hvd.cycle_s
    sharers = ranks_per_node if sharing_ranks is None else sharing_ranks
    slow = cpu.sharing(sharers)
    total = 0.0
    if step.allreduce > 0:
        buffers = math.ceil(step.allreduce / hvd.fusion_bytes)
        size = step.allreduce / buffers
        total += buffers * (allreduce_s(size, nodes, ranks_per_node, net) + wait
                            + slow * allreduce_cpu_s(size, ranks, cpu))
    if step.allgather_slice > 0:
        total += allgather_s(step.allgather_slice, nodes, ranks_per_node, net) + wait
        total += (cpu.sharing(sharers, cpu.graddrop_parallel)
                  * step.graddrop_entries * cpu.graddrop_s_per_entry)
    if step.periodic > 0:
        total += (allreduce_s(step.periodic, nodes, ranks_per_node, net)
                  + slow * allreduce_cpu_s(step.periodic, ranks, cpu)) / step.period
    return total


def link_bytes(step: StepBytes, nodes: int, ranks_per_node: int) -> float:
    """Bytes one node sends on its link per step (ring algorithms, between nodes)."""
    if nodes <= 1:
        return 0.0
    m = nodes
    ranks = nodes * ranks_per_node
    sent = 2.0 * (m - 1) / m * step.allreduce
    sent += (m - 1) / m * step.allgather_slice * ranks
    sent += 2.0 * (m - 1) / m * step.periodic / step.period
    return sent


def step_s(compute_s: float, exchange: float, overlap: float) -> float:
    """A step's seconds: compute, plus the exchange that backward does not hide."""
    hidden = overlap * BACKWARD_SHARE * compute_s
    return compute_s + max(0.0, exchange - hidden)


def table(nodes_list: Sequence[int], ranks_per_node: int, compute_s: float, tokens_per_rank: float,
          weak: StepBytes, strong: StepBytes, net: Network, hvd: Horovod = Horovod(),
          steps: Optional[int] = None, tokens: Optional[float] = None,
          cpu: Cpu = NO_CPU) -> List[Dict[str, Any]]:
    """One row per node count: weak scaling (the per-rank batch fixed) and strong scaling (the
    global batch of the first row fixed, compute proportional to tokens per rank).

    ``strong``: the step bytes at the first row's batch per rank; per-rank slices that follow
    the batch (``slice_follows_batch``) shrink with it."""
    rows = []
    base_ranks = nodes_list[0] * ranks_per_node
    base = None
    for nodes in nodes_list:
        ranks = nodes * ranks_per_node
        ex = exchange_s(weak, nodes, ranks_per_node, net, hvd, cpu)
        t = step_s(compute_s, ex, hvd.overlap)
        tps = ranks * tokens_per_rank / t
        share = base_ranks / ranks
        s_slice = strong.allgather_slice * (share if strong.slice_follows_batch else 1.0)
        s_bytes = replace(strong, allgather_slice=s_slice)
        s_compute = compute_s * share
        s_ex = exchange_s(s_bytes, nodes, ranks_per_node, net, hvd, cpu)
        s_t = step_s(s_compute, s_ex, hvd.overlap)
        if base is None:
            base = {"tps_per_rank": tps / ranks, "strong_t": s_t}
        row = {"nodes": nodes, "ranks": ranks, "compute_s": compute_s, "exchange_s": ex,
               "exposed_exchange_s": t - compute_s, "step_s": t, "tokens_per_s": tps,
               "link_bytes_per_step": link_bytes(weak, nodes, ranks_per_node),
               "weak_efficiency": (tps / ranks) / base["tps_per_rank"],
               "strong_step_s": s_t,
               "strong_efficiency": base["strong_t"] / (s_t * ranks / base_ranks)}
        if steps is not None:
            row["time_to_steps_s"] = steps * t
        if tokens is not None:
            row["time_to_tokens_s"] = tokens / tps
        rows.append(row)
    return rows
