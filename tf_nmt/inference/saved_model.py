"""Translation with a SavedModel export: its ``serving_default`` signature as a function of a
list of strings (what ``tf-nmt translate --export-dir`` and a user's own code call)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, List

from tf_nmt.errors import UsageError


def load_serving(export_dir: Path) -> Callable[[List[str]], List[str]]:
    """``texts -> translations`` of the SavedModel in ``export_dir`` (one clear line when the
    directory holds none)."""
    from tf_nmt.compat import tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    if not (Path(export_dir) / "saved_model.pb").is_file():
        raise UsageError(f"--export-dir {export_dir}: no SavedModel there (saved_model.pb is "
                         "missing) and no CTranslate2 export (model.bin and tf_nmt_export.json); "
                         "export one with `tf-nmt export`")
    signature = tf.saved_model.load(str(export_dir)).signatures["serving_default"]

    def serve(texts: List[str]) -> List[str]:
        if not texts:
            return []
        out = signature(texts=tf.constant(texts))["translations"].numpy()
        return [t.decode("utf-8") for t in out]

    return serve
