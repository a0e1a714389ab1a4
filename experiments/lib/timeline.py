"""Reading Horovod timeline files (``HOROVOD_TIMELINE``): collective ops, their sizes and times.

Horovod's timeline is a Chrome-trace JSON array written by rank 0: one trace "process" per tensor
name, and per operation a top-level ``B``/``E`` pair (``NEGOTIATE_ALLREDUCE``, ``ALLREDUCE``,
``ALLGATHER``, ...) with nested activities (``GLOO_ALLREDUCE``, ``MEMCPY_IN_FUSION_BUFFER``);
the closing ``E`` of a data-moving op carries the result's dtype and shape. A file whose job was
killed may lack the closing ``]``; it is read all the same.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from tf_nmt.distributed.accounting import tensor_bytes

DATA_OPS = ("ALLREDUCE", "ALLGATHER", "BROADCAST", "ALLTOALL", "REDUCESCATTER")


@dataclass(frozen=True)
class TimelineOp:
    """One top-level timeline activity of one tensor (times in microseconds)."""

    tensor: str
    kind: str
    start_us: float
    end_us: float
    dtype: Optional[str] = None
    shape: Optional[Tuple[int, ...]] = None

    @property
    def duration_us(self) -> float:
        return self.end_us - self.start_us

    @property
    def nbytes(self) -> Optional[int]:
        """Size of the op's result (gathered/reduced tensor), when the timeline recorded it."""
        if self.dtype is None or self.shape is None:
            return None
        return tensor_bytes(self.shape, self.dtype)


def _parse_shape(text: str) -> Tuple[int, ...]:
    inner = text.strip().strip("[]").strip()
    return tuple(int(d) for d in inner.split(",")) if inner else ()


def load_events(path: Path) -> List[dict]:
    """The trace events of a timeline file (tolerates a missing closing bracket)."""
    text = Path(path).read_text().strip()
    if not text:
        raise ValueError(f"empty Horovod timeline {path}")
    try:
        events = json.loads(text)
    except json.JSONDecodeError:
        try:
            events = json.loads(text.rstrip(",") + "]")
        except json.JSONDecodeError as err:
            raise ValueError(f"{path} is not a Horovod timeline: {err}") from err
    if not isinstance(events, list):
        raise ValueError(f"{path} is not a Horovod timeline (expected a JSON array)")
    return events


def parse_events(events: Iterable[dict]) -> List[TimelineOp]:
    """Top-level activities, in end-time order; nested activities are folded into their op."""
    names: Dict[int, str] = {}
    stacks: Dict[int, List[Tuple[str, float]]] = {}
    ops: List[TimelineOp] = []
    for ev in events:
        ph, pid = ev.get("ph"), ev.get("pid")
        if ph == "M" and ev.get("name") == "process_name" and "name" in ev.get("args", {}):
            names[pid] = ev["args"]["name"]
        elif ph == "B":
            stacks.setdefault(pid, []).append((ev["name"], float(ev["ts"])))
        elif ph == "E" and stacks.get(pid):
            kind, start = stacks[pid].pop()
            if stacks[pid]:
                continue  # a nested activity (e.g. GLOO_ALLREDUCE) ends
            args = ev.get("args", {})
            shape = _parse_shape(args["shape"]) if "shape" in args else None
            ops.append(TimelineOp(names.get(pid, str(pid)), kind, start, float(ev["ts"]),
                                  args.get("dtype"), shape))
    return ops


def read_timeline(path: Path) -> List[TimelineOp]:
    """Top-level activities of a Horovod timeline file."""
    return parse_events(load_events(path))


def busy_us(ops: Sequence[TimelineOp], kinds: Iterable[str] = DATA_OPS) -> float:
    """Wall time during which at least one op of ``kinds`` was running (fused or concurrent ops
    overlap, so durations are merged as intervals, not summed)."""
    wanted = set(kinds)
    spans = sorted((op.start_us, op.end_us) for op in ops if op.kind in wanted)
    total, cur_start, cur_end = 0.0, None, None
    for start, end in spans:
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def bytes_by_kind(ops: Sequence[TimelineOp]) -> Dict[str, int]:
    """Total result bytes per op kind (ops without a recorded size are skipped)."""
    out: Dict[str, int] = {}
    for op in ops:
        if op.nbytes is not None:
            out[op.kind] = out.get(op.kind, 0) + op.nbytes
    return out
