"""tf_nmt.export: the string-to-string SavedModel (float and packed low-bit weights)."""
from pathlib import Path
from typing import Any, Optional, Sequence

from tf_nmt.utils.io import write_json_atomic

#: Sentences per length-sorted chunk that an export decodes at a time (``tf-nmt export
#: --chunk-size``; 0 decodes each request whole). 16 is the measured best on the quickstart model
#: (``experiments/serving_speed/results/serving_speed_chunks.json``): 1.23-1.59x the unchunked export for mixed-length
#: requests of 32-64 sentences, 1.13-1.22x for long sentences, 0.95-0.97x for medium ones, and no
#: change for requests of at most 16 sentences, which are one chunk.
SERVING_CHUNK_SIZE = 16

#: In a SavedModel export: which weights it holds (raw or EMA), from which run, in which languages.
EXPORT_WEIGHTS_RECORD = "tf_nmt_weights.json"


def record_exported_weights(export_dir: Path, weights: str, run_dir: Path,
                            checkpoint: Optional[str], languages: Sequence[str],
                            **extra: Any) -> None:
    """Write :data:`EXPORT_WEIGHTS_RECORD` into a SavedModel export (``extra``: more keys)."""
    write_json_atomic(Path(export_dir) / EXPORT_WEIGHTS_RECORD,
                      {"weights": weights, "run_dir": str(run_dir), "checkpoint": checkpoint,
                       "languages": list(languages), **extra})
