"""``tf-nmt convert-keras``: a run trained on one Keras version, converted to this process's."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict


def convert_keras(run_dir: Path, output_dir: Path) -> Dict[str, Any]:
    """Write ``output_dir``: ``run_dir`` converted to this process's Keras (``--keras`` /
    ``TF_NMT_KERAS``; :mod:`tf_nmt.training.keras_convert`). Returns its ``converted_from``
    record (``resumable``: whether training can go on from it)."""
    from tf_nmt.training.keras_convert import convert_run

    record = convert_run(Path(run_dir), Path(output_dir))
    how = ("it resumes where the original stopped" if record["resumable"] else
           "for evaluation, export and --init-from only: "
           + "; ".join(record["why_not_resumable"]))
    print(f"converted {record['checkpoints']} checkpoint(s) of {run_dir} from Keras "
          f"{record['keras']} into {output_dir} ({how})")
    return record
