"""``tf-nmt average-checkpoints``: the average of a run's last checkpoints, as a new checkpoint."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional


@dataclass
class Averaged:
    """What :func:`average` wrote: the new checkpoint's prefix (None when there was a single
    checkpoint to use alone), the prefixes averaged, and which of their weights."""

    checkpoint: Optional[str]
    prefixes: List[str]
    weights: str


def average(run_dir: Path, last: int, output_dir: Path, overwrite: bool = False,
            weights: Optional[str] = None, at_most: bool = False) -> Averaged:
    """Average the ``weights`` (``raw``, ``ema``, or None: the EMA where every checkpoint holds
    one) of the run's last ``last`` checkpoints into a checkpoint in ``output_dir``, which holds
    them as its model weights. Fewer checkpoints than ``last`` are refused, unless ``at_most``
    (the quickstart's "up to K"): then what the run kept is averaged, and a single checkpoint
    is used alone (nothing written)."""
    from tf_nmt.run_dir import RunDir, RunDirError, checkpoints_weights, load_trained_model
    from tf_nmt.training.checkpoints import average_checkpoints, list_checkpoints

    run = RunDir(Path(run_dir))
    prefixes = list_checkpoints(run.checkpoints)[-last:]
    if len(prefixes) < last and not at_most:
        raise RunDirError(f"asked to average the last {last} checkpoints but "
                          f"{run.checkpoints} holds {len(prefixes)}")
    weights = checkpoints_weights(prefixes, weights)
    if len(prefixes) < 2 and at_most:
        return Averaged(None, prefixes, weights)
    model, _, _ = load_trained_model(run.root, prefixes[-1], "raw")
    out = average_checkpoints(model, prefixes, Path(output_dir), overwrite=overwrite,
                              weights=weights)
    print(f"averaged the {weights} weights of the last {len(prefixes)} checkpoints "
          f"({', '.join(Path(p).name for p in prefixes)}) into {out}; score it with: tf-nmt "
          f"evaluate --run-dir {run.root} --checkpoint {output_dir}")
    return Averaged(out, prefixes, weights)
