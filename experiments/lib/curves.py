"""BLEU of every kept checkpoint of a run: the learning curve the studies compare.

Each point is scored in this process with :func:`tf_nmt.evaluation.evaluate.evaluate_run` and
cached next to the checkpoints (``<run_dir>/bleu_curve/<split>-<step>.json``, with the
evaluation settings), so a resumed study scores only the checkpoints it has not scored with
the same settings.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from tf_nmt.evaluation.evaluate import evaluate_run
from tf_nmt.training.checkpoints import list_checkpoints
from tf_nmt.run_dir import RunDir
from tf_nmt.utils.io import write_json_atomic

CACHE_DIR = "bleu_curve"


def checkpoint_step(prefix: str) -> int:
    """The optimizer step a checkpoint prefix (``.../ckpt-500``) was saved at."""
    return int(str(prefix).rsplit("-", 1)[1])


def trained_steps(run_dir: Path) -> int:
    """The step of the run's newest checkpoint (0 when it has none)."""
    prefixes = list_checkpoints(RunDir(Path(run_dir)).checkpoints)
    return checkpoint_step(prefixes[-1]) if prefixes else 0


def bleu_curve(run_dir: Path, split: str = "test", data_dir: Optional[Path] = None,
               limit: int = 0, beam_size: Optional[int] = None,
               launched: Optional[float] = None,
               log: Callable[[str], None] = print) -> List[Dict[str, Any]]:
    """``[{step, bleu, chrf[, seconds]}]`` for every kept checkpoint of ``run_dir``, by step.

    ``limit`` scores only the first sentences of ``split``; ``beam_size`` None is the run's
    configured beam. With ``launched`` (a ``time.time()`` value) each point also has
    ``seconds``: the checkpoint file's modification time since then, i.e. wall time to reach it.
    """
    run = RunDir(Path(run_dir))
    settings = {"split": split, "limit": int(limit), "beam_size": beam_size,
                "data_dir": None if data_dir is None else str(data_dir)}
    curve = []
    for prefix in list_checkpoints(run.checkpoints):
        step = checkpoint_step(prefix)
        cache = run.root / CACHE_DIR / f"{split}-{step}.json"
        cached = json.loads(cache.read_text()) if cache.is_file() else {}
        if cached.get("settings") == settings:
            point = cached["point"]
        else:
            report = evaluate_run(run.root, split=split, checkpoint=prefix, data_dir=data_dir,
                                  beam_size=beam_size, limit=limit, log=lambda _m: None)
            point = {"step": step, "bleu": report["bleu"], "chrf": report["chrf"]}
            write_json_atomic(cache, {"settings": settings, "point": point})
        if launched is not None:
            point = {**point, "seconds": Path(prefix + ".index").stat().st_mtime - launched}
        log(f"  step {step:>6}: {split} BLEU {point['bleu']:.2f}")
        curve.append(point)
    return sorted(curve, key=lambda p: p["step"])


def first_reaching(curve: List[Dict[str, Any]], threshold: float) -> Optional[Dict[str, Any]]:
    """The first point of ``curve`` with BLEU >= ``threshold`` (None when none reaches it)."""
    return next((p for p in curve if p["bleu"] >= threshold), None)
