"""Figures of the studies: headless matplotlib, log-log axes, PNGs written atomically."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Tuple

import matplotlib

matplotlib.use("Agg")  # no display: before pyplot is imported
import matplotlib.pyplot as plt  # noqa: E402


def subplots(rows: int, cols: int, figsize: Tuple[float, float]) -> Tuple[Any, Any]:
    """(figure, 2-D array of axes) -- ``plt.subplots`` with ``squeeze=False``."""
    return plt.subplots(rows, cols, figsize=figsize, squeeze=False)


def log_log_axes(axes: Iterable[Any], xlabel: str) -> None:
    """Log scales on both axes, a light grid, ``xlabel`` and a small legend on each."""
    for ax in axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)


def save_figure(fig: Any, path: Path, dpi: int = 110) -> None:
    """Lay out ``fig`` and write it to ``path`` (PNG) via a temporary file; close it."""
    path = Path(path)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp" + path.suffix)
    fig.savefig(tmp, dpi=dpi)
    tmp.replace(path)
    plt.close(fig)
