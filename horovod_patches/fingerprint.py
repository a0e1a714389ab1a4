"""Rank-agreement fingerprints for elastic training: after every sync (the start of each
elastic attempt, so after every recovery) and at the end of a run, each rank appends a sha256 of
its shared state (model variables and optimizer variables, in one fixed order) and the step to
its own log file; :func:`disagreements` then says where the ranks held different state.

Why: a job that exits 0 at its last step may still have ranks that silently hold different
weights after a recovery (a broadcast that missed a variable, a rollback that restored only part
of the state). Hashing costs one pass over the state's bytes per sync, not per step.

One file per process (``<host>.<pid>.jsonl``), each entry one ``os.write`` of one line to an
``O_APPEND`` file followed by an fsync, so ranks never write to the same file and a kill leaves
at most a torn last line (skipped when read). Imports neither Horovod nor TensorFlow.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple, Union

import numpy as np

__all__ = ["state_fingerprint", "record", "read_entries", "disagreements"]

PathLike = Union[str, os.PathLike]


def state_fingerprint(variables: Sequence[Any]) -> str:
    """sha256 over each variable's dtype, shape and bytes, in the order given (names are left
    out: Keras may number them differently in each process)."""
    digest = hashlib.sha256()
    for var in variables:
        value = np.ascontiguousarray(var.numpy())
        digest.update(f"{value.dtype.str}{value.shape};".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def record(directory: PathLike, event: str, step: int, rank: int, world_size: int,
           fingerprint: str, **extra: Any) -> Dict[str, Any]:
    """Append one entry to this process's file in ``directory``; returns it. ``event`` is
    ``"sync"`` (an attempt starts: after every recovery) or ``"end"``; ``extra`` (e.g. the
    attempt number every rank agrees on) is kept with it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    entry = {"event": event, "step": int(step), "rank": int(rank), "world_size": int(world_size),
             "fingerprint": fingerprint, **extra, "host": socket.gethostname(),
             "pid": os.getpid(), "time": time.time()}
    path = directory / f"{socket.gethostname()}.{os.getpid()}.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return entry


def read_entries(directory: PathLike) -> List[Dict[str, Any]]:
    """Every entry of every process file in ``directory`` (a torn last line is skipped), by time."""
    entries: List[Dict[str, Any]] = []
    for path in sorted(Path(directory).glob("*.jsonl")) if Path(directory).is_dir() else []:
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return sorted(entries, key=lambda e: e.get("time", 0.0))


def _group_key(entry: Dict[str, Any]) -> Tuple[Any, ...]:
    return (entry["event"], entry.get("attempt"), entry["step"], entry["world_size"])


def disagreements(entries: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The syncs and ends at which the ranks' fingerprints differ (``kind: "diverged"``, with
    ``ranks``: fingerprint -> the ranks that held it) or some rank of the world recorded none
    (``kind: "missing"``, with ``missing_ranks``). Entries are grouped by event, attempt, step
    and world size; empty when every group has one fingerprint from every rank."""
    groups: Dict[Tuple[Any, ...], List[Dict[str, Any]]] = {}
    for entry in entries:
        groups.setdefault(_group_key(entry), []).append(entry)
    problems = []
    for (event, attempt, step, world_size), group in groups.items():
        by_fingerprint: Dict[str, List[int]] = {}
        for entry in group:
            by_fingerprint.setdefault(entry["fingerprint"], []).append(int(entry["rank"]))
        where = {"event": event, "attempt": attempt, "step": step, "world_size": world_size}
        if len(by_fingerprint) > 1:
            problems.append({"kind": "diverged", **where,
                             "ranks": {fp: sorted(r) for fp, r in by_fingerprint.items()}})
        missing = sorted(set(range(world_size)) - {int(e["rank"]) for e in group})
        if missing:
            problems.append({"kind": "missing", **where, "missing_ranks": missing})
    return problems
