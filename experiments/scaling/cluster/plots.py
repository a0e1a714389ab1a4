"""PNG plots of a scaling study: efficiency vs workers, and the step-time split."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Mapping, Sequence


def _save(fig, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    tmp.replace(path)


def plot_study(rows: Sequence[Mapping[str, object]], out_dir: Path, title: str,
               prefix: str = "scaling") -> List[Path]:
    """Write ``<prefix>_efficiency.png`` and ``<prefix>_step_split.png``; returns the paths
    (none when there are no rows, e.g. a study without its N=1 baseline)."""
    if not rows:
        return []
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    kinds = sorted({str(r["kind"]) for r in rows}, reverse=True)  # weak, strong
    fig, axes = plt.subplots(1, len(kinds), figsize=(5.5 * len(kinds), 4), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        groups: Dict[tuple, List[Mapping[str, object]]] = {}
        for r in rows:
            if r["kind"] == kind:
                groups.setdefault((r["link"], r["comm"]), []).append(r)
        for (link, comm), rs in sorted(groups.items()):
            rs = sorted(rs, key=lambda r: int(r["workers"]))
            ax.plot([int(r["workers"]) for r in rs], [100 * float(r["efficiency"]) for r in rs],
                    marker="o", label=f"{comm} @ {link}")
        ax.axhline(100, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("workers N")
        ax.set_ylabel("efficiency = speed-up / N (%)")
        ax.set_title(f"{kind} scaling")
        ax.set_xticks(sorted({int(r["workers"]) for r in rows}))
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    eff_path = out_dir / f"{prefix}_efficiency.png"
    _save(fig, eff_path)
    plt.close(fig)

    ordered = sorted(rows, key=lambda r: (r["kind"], r["link"], r["comm"], int(r["workers"])))
    labels = [f"{r['kind']} {r['comm']}\n{r['link']} N={r['workers']}" for r in ordered]
    compute = [1e3 * float(r["compute_s"]) for r in ordered]
    comm = [1e3 * float(r["comm_s"]) for r in ordered]
    fig, ax = plt.subplots(figsize=(max(6, 0.75 * len(ordered)), 4.5))
    xs = range(len(ordered))
    ax.bar(xs, compute, label="compute (step without exchange)")
    ax.bar(xs, comm, bottom=compute, label="communication (step − compute)")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, rotation=90, fontsize=7)
    ax.set_ylabel("step time (ms)")
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    split_path = out_dir / f"{prefix}_step_split.png"
    _save(fig, split_path)
    plt.close(fig)
    return [eff_path, split_path]
