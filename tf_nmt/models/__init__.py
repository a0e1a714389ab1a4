"""NMT models behind one interface (see :mod:`tf_nmt.models.base`), built by name."""
from __future__ import annotations

from typing import Any, Dict

from tf_nmt.compat import keras
from tf_nmt.models.gnmt import GNMT, GNMT_DEFAULTS
from tf_nmt.models.transformer import TRANSFORMER_DEFAULTS, Transformer

MODEL_CLASSES = {"transformer": Transformer, "gnmt": GNMT}
MODEL_DEFAULTS: Dict[str, Dict[str, Any]] = {"transformer": dict(TRANSFORMER_DEFAULTS),
                                             "gnmt": dict(GNMT_DEFAULTS)}


def build_model(kind: str, vocab_size: int, **hparams: Any) -> keras.Model:
    """A new model of ``kind`` ("transformer" or "gnmt"); unset hparams take ``MODEL_DEFAULTS``."""
    if kind not in MODEL_CLASSES:
        raise ValueError(f"unknown model kind {kind!r}; valid kinds: {sorted(MODEL_CLASSES)}")
    defaults = MODEL_DEFAULTS[kind]
    unknown = sorted(set(hparams) - set(defaults))
    if unknown:
        raise ValueError(f"unknown {kind} hyper-parameter(s) {unknown}; valid ones: {sorted(defaults)}")
    return MODEL_CLASSES[kind](vocab_size, **{**defaults, **hparams})


__all__ = ["build_model", "MODEL_DEFAULTS", "MODEL_CLASSES", "Transformer", "GNMT"]
