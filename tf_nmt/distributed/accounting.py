"""Every byte formula of the gradient exchange, in one place.

* sizes: :func:`itemsize`, :func:`tensor_bytes` (a shape and dtype name), :func:`slice_bytes`
  (an IndexedSlices), :func:`variables_bytes` (one dense copy of some variables: what a dense
  allreduce or a parameter average hands to the collective) and :func:`graph_tensors_bytes`
  (what a step hands to the collectives, counted inside a ``tf.function``);
* ring traffic: :func:`ring_allreduce_bytes`, :func:`ring_allgather_bytes`, and what a rank
  puts on its link per step for a comm mode (:func:`link_send_bytes`); per-rank :class:`Exchange` records and their
  extrapolation to more ranks (:func:`project`, :func:`curve`).

The comm modes (:mod:`tf_nmt.distributed.comm`) and the studies' measurements of Horovod's
traffic (``experiments/accumulation/horovod_traffic.py``, ``experiments/lib/timeline.py``) all
count bytes with these.
The model of Horovod's exchange, per step and per rank:

* A sparse gradient (``tf.IndexedSlices``, ``sparse_as_dense=False``) is exchanged by two
  allgathers (values and indices). A rank *contributes* its slice (values + indices bytes) and
  ends up holding the *accumulated buffer*: the concatenation of every rank's slice, i.e. the sum
  over ranks of their slice bytes. It grows linearly with the number of ranks N. Over a ring
  allgather a rank *receives* every other rank's slice.
* A dense gradient (and every gradient with ``sparse_as_dense=True``) is allreduced in place: a
  rank contributes the tensor and holds a buffer of the same size whatever N. A ring allreduce
  sends and receives ``2 (N - 1) / N`` of the tensor per rank.

Extrapolation to N ranks uses the measured mean per-rank slice bytes (a rank's slice depends on
its own batch only, not on N), so ``buffer_off(N) = N * slice + dense_rest`` and
``buffer_on(N) = dense_total``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence

from tf_nmt.compat import tf
from tf_nmt.config import HOROVOD_MODES

_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1,
             "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "uint32": 4,
             "uint64": 8, "bool": 1}


def itemsize(dtype: str) -> int:
    """Bytes per element of a dtype name (``"float32"``, ``"int64"``, ...)."""
    if dtype not in _ITEMSIZE:
        raise ValueError(f"unknown dtype {dtype!r} (known: {', '.join(sorted(_ITEMSIZE))})")
    return _ITEMSIZE[dtype]


def tensor_bytes(shape: Sequence[int], dtype: str) -> int:
    """Bytes of a dense tensor of ``shape`` and ``dtype``."""
    count = 1
    for dim in shape:
        if dim < 0:
            raise ValueError(f"shape must be fully known and non-negative, got {list(shape)}")
        count *= int(dim)
    return count * itemsize(dtype)


def slice_bytes(rows: int, row_elements: int, value_dtype: str = "float32",
                index_dtype: str = "int64") -> int:
    """Bytes of an IndexedSlices with ``rows`` rows: values ``[rows, row_elements]`` + indices."""
    if rows < 0 or row_elements < 0:
        raise ValueError(f"rows and row_elements must be >= 0, got {rows}, {row_elements}")
    return rows * row_elements * itemsize(value_dtype) + rows * itemsize(index_dtype)


def variables_bytes(variables: Iterable[Any]) -> int:
    """Bytes of one dense copy of ``variables`` (or anything with a static ``shape``/``dtype``):
    what a dense allreduce of their gradients, or one parameter average, hands to Horovod."""
    return sum(tensor_bytes([int(d) for d in v.shape], tf.as_dtype(v.dtype).name) for v in variables)


def graph_tensors_bytes(tensors: Iterable[tf.Tensor]) -> tf.Tensor:
    """Total bytes of ``tensors`` as an int64 scalar tensor (sizes may be dynamic, so this works
    inside a ``tf.function``): element count x item size, summed."""
    total = tf.constant(0, tf.int64)
    for t in tensors:
        total += tf.cast(tf.size(t), tf.int64) * t.dtype.size
    return total


def ring_allreduce_bytes(nbytes: float, ranks: int) -> float:
    """Bytes one rank receives (and sends) in a ring allreduce of an ``nbytes`` tensor."""
    _check_ranks(ranks)
    return 2.0 * (ranks - 1) / ranks * nbytes


def ring_allgather_bytes(mean_slice: float, ranks: int) -> float:
    """Bytes one rank sends (and receives) in a ring allgather where ranks contribute
    ``mean_slice`` bytes on average: its own slice and every other rank's but one, forwarded."""
    _check_ranks(ranks)
    return (ranks - 1) * float(mean_slice)


def link_send_bytes(mode: str, payload: float, ranks: int) -> float:
    """The gradient bytes one rank sends per step for comm ``mode`` (without protocol headers or
    control messages): the allreduced dense copy for Horovod's modes, the allgathered
    (positions, values) for graddrop. ``payload`` is what the rank hands to the collective
    (graddrop: the ranks' mean)."""
    if mode in HOROVOD_MODES:
        return ring_allreduce_bytes(payload, ranks)
    if mode == "graddrop":
        return ring_allgather_bytes(payload, ranks)
    raise ValueError(f"no per-step link model for comm mode {mode!r}")


@dataclass(frozen=True)
class Exchange:
    """One rank's side of one step's gradient exchange (bytes)."""

    contributed: float  # what this rank hands to Horovod (its input tensors)
    received: float     # what arrives at this rank over the wire (ring algorithms)
    buffer: float       # the accumulated result every rank holds after the exchange

    def to_dict(self) -> Dict[str, float]:
        return asdict(self)


def allgather_exchange(per_rank_slices: Sequence[float], rank: int) -> Exchange:
    """Sparse gradients of one step: ``per_rank_slices[r]`` are rank r's slice bytes."""
    if not 0 <= rank < len(per_rank_slices):
        raise ValueError(f"rank {rank} out of range for {len(per_rank_slices)} ranks")
    total = float(sum(per_rank_slices))
    own = float(per_rank_slices[rank])
    return Exchange(contributed=own, received=total - own, buffer=total)


def allreduce_exchange(nbytes: float, ranks: int) -> Exchange:
    """Dense gradients of one step: a tensor of ``nbytes`` allreduced over ``ranks`` ranks."""
    return Exchange(contributed=float(nbytes), received=ring_allreduce_bytes(nbytes, ranks),
                    buffer=float(nbytes))


def combine(parts: Iterable[Exchange]) -> Exchange:
    """The sum of several tensors' exchanges (e.g. sparse embedding + dense rest)."""
    parts = list(parts)
    return Exchange(contributed=sum(p.contributed for p in parts),
                    received=sum(p.received for p in parts), buffer=sum(p.buffer for p in parts))


def project(ranks: int, slice_per_rank: float, sparse_dense_bytes: float,
            dense_rest_bytes: float) -> Dict[str, Optional[float]]:
    """Off/on exchange at ``ranks`` ranks from measured per-rank sizes.

    ``slice_per_rank``: mean bytes of one rank's sparse gradient slices in a step;
    ``sparse_dense_bytes``: the same gradients' size when densified;
    ``dense_rest_bytes``: all other (always dense) gradients.
    Ratios are off/on buffer sizes (None when there is nothing to divide by).
    """
    _check_ranks(ranks)
    if min(slice_per_rank, sparse_dense_bytes, dense_rest_bytes) < 0:
        raise ValueError("byte sizes must be >= 0")
    rest = allreduce_exchange(dense_rest_bytes, ranks)
    off = combine([allgather_exchange([slice_per_rank] * ranks, 0), rest])
    on = combine([allreduce_exchange(sparse_dense_bytes, ranks), rest])
    sparse_off = ranks * slice_per_rank
    return {"ranks": ranks,
            "off_contributed_bytes": off.contributed, "off_received_bytes": off.received,
            "off_buffer_bytes": off.buffer,
            "on_contributed_bytes": on.contributed, "on_received_bytes": on.received,
            "on_buffer_bytes": on.buffer,
            "buffer_ratio": off.buffer / on.buffer if on.buffer else None,
            "sparse_buffer_ratio": sparse_off / sparse_dense_bytes if sparse_dense_bytes else None}


def curve(ranks: Iterable[int], slice_per_rank: float, sparse_dense_bytes: float,
          dense_rest_bytes: float) -> List[Dict[str, Optional[float]]]:
    """:func:`project` for each rank count."""
    return [project(n, slice_per_rank, sparse_dense_bytes, dense_rest_bytes) for n in ranks]


def _check_ranks(ranks: int) -> None:
    if int(ranks) != ranks or ranks < 1:
        raise ValueError(f"ranks must be a positive integer, got {ranks!r}")
