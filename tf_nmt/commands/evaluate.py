"""``tf-nmt evaluate``: beam-search translate a split of the run's data and score it with
sacreBLEU and chrF (:func:`tf_nmt.evaluation.evaluate.evaluate_run`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

from tf_nmt.utils.io import write_json_atomic


def evaluate(run_dir: Path, split: str = "test", checkpoint: Optional[str] = None,
             data_dir: Optional[Path] = None, beam_size: Optional[int] = None,
             length_penalty: Optional[float] = None, limit: int = 0, lowprec: bool = False,
             weights: Optional[str] = None, output_json: Optional[Path] = None) -> Dict[str, Any]:
    """The report of :func:`~tf_nmt.evaluation.evaluate.evaluate_run` (``weights`` None: the
    EMA where the checkpoint holds one; ``lowprec``: the matmuls in the log-space CPU kernels),
    also written to ``output_json`` when given."""
    from tf_nmt.evaluation.evaluate import evaluate_run

    report = evaluate_run(Path(run_dir), split=split, checkpoint=checkpoint, data_dir=data_dir,
                          beam_size=beam_size, length_penalty=length_penalty, limit=limit,
                          engine="lowprec" if lowprec else "emulated", weights=weights)
    if output_json:
        write_json_atomic(Path(output_json), report)
    return report
