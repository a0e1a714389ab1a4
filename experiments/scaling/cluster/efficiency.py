"""Scaling-efficiency arithmetic and tables.

Both study kinds compare throughput with the 1-worker run of the same comm mode and link:

* weak scaling (fixed per-worker batch): speed-up = tokens/s(N) / tokens/s(1) (scaled speed-up;
  ideal N, since N workers process N times the tokens per step);
* strong scaling (fixed global batch): speed-up = step time(1) / step time(N), which equals the
  tokens/s ratio because every step processes the same global batch.

Efficiency = speed-up / N (1.0 is perfect scaling).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

SCALING_KINDS = ("weak", "strong")


def speedup(tokens_per_s: float, baseline_tokens_per_s: float) -> float:
    """Throughput ratio against the 1-worker baseline."""
    if tokens_per_s <= 0 or baseline_tokens_per_s <= 0:
        raise ValueError(f"throughputs must be positive, got {tokens_per_s}, {baseline_tokens_per_s}")
    return tokens_per_s / baseline_tokens_per_s


def efficiency(tokens_per_s: float, baseline_tokens_per_s: float, workers: int) -> float:
    """``speedup / workers``."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    return speedup(tokens_per_s, baseline_tokens_per_s) / workers


def strong_split(global_sentences: int, workers: int) -> int:
    """Per-worker batch of a fixed global batch; it must divide evenly (else the runs would not
    process the same global batch)."""
    if workers < 1 or global_sentences < 1:
        raise ValueError("global batch and workers must be >= 1")
    if global_sentences % workers:
        raise ValueError(f"global batch {global_sentences} is not divisible by {workers} workers")
    return global_sentences // workers


@dataclass(frozen=True)
class Row:
    """One (link, comm, kind, N) measurement with its efficiency."""

    link: str
    comm: str
    kind: str
    workers: int
    tokens_per_s: float
    step_s: float
    compute_s: float
    comm_s: float
    speedup: float
    efficiency: float
    link_bytes_per_step: Optional[float] = None  # emulated: sent per host in the distributed steps
    predicted_bytes_per_step: Optional[float] = None  # the gradient payload accounting predicts

    @property
    def comm_fraction(self) -> float:
        return self.comm_s / self.step_s if self.step_s > 0 else 0.0


def efficiency_rows(runs: Iterable[Mapping[str, object]]) -> List[Row]:
    """Rows for every run whose group (link, comm, kind) has a 1-worker baseline.

    Each run needs keys link, comm, kind, world, tokens_per_s, step_s, compute_s, comm_s.
    """
    runs = list(runs)
    base: Dict[Tuple[str, str, str], float] = {}
    for r in runs:
        if int(r["world"]) == 1:
            base[(str(r["link"]), str(r["comm"]), str(r["kind"]))] = float(r["tokens_per_s"])
    rows = []
    for r in runs:
        key = (str(r["link"]), str(r["comm"]), str(r["kind"]))
        if key not in base:
            continue
        n = int(r["world"])
        tps = float(r["tokens_per_s"])
        rows.append(Row(key[0], key[1], key[2], n, tps, float(r["step_s"]), float(r["compute_s"]),
                        float(r["comm_s"]), speedup(tps, base[key]), efficiency(tps, base[key], n),
                        r.get("link_bytes_per_step"), r.get("predicted_link_bytes_per_step")))
    return sorted(rows, key=lambda row: (row.link, row.kind, row.comm, row.workers))


def markdown_table(rows: Sequence[Row]) -> str:
    """A Markdown table of the rows (one line per measurement)."""
    head = ("| link | scaling | comm | N | tokens/s | step ms | compute ms | comm ms | comm share "
            "| MB/step on link | MB/step predicted | speed-up | efficiency |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        lines.append(f"| {r.link} | {r.kind} | {r.comm} | {r.workers} | {r.tokens_per_s:.0f} | "
                     f"{1e3 * r.step_s:.0f} | {1e3 * r.compute_s:.0f} | {1e3 * r.comm_s:.0f} | "
                     f"{100 * r.comm_fraction:.0f}% | {_mb(r.link_bytes_per_step)} | "
                     f"{_mb(r.predicted_bytes_per_step)} | "
                     f"{r.speedup:.2f} | {100 * r.efficiency:.0f}% |")
    return "\n".join(lines)


def _mb(value: Optional[float]) -> str:
    return "-" if value is None else f"{value / 1e6:.2f}"
