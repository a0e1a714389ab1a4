"""NMT models behind one interface (see :mod:`tf_nmt.models.base`), built by name."""
from __future__ import annotations

from typing import Any, Dict, Optional

from tf_nmt.compat import keras
from tf_nmt.config import ConfigError
from tf_nmt.models.activation_quant import ActivationQuantization
from tf_nmt.models.gnmt import GNMT, GNMT_DEFAULTS
from tf_nmt.models.transformer import TRANSFORMER_DEFAULTS, Transformer

MODEL_CLASSES = {"transformer": Transformer, "gnmt": GNMT}
MODEL_DEFAULTS: Dict[str, Dict[str, Any]] = {"transformer": dict(TRANSFORMER_DEFAULTS),
                                             "gnmt": dict(GNMT_DEFAULTS)}


def check_model_config(kind: str, hparams: Dict[str, Any]) -> None:
    """ConfigError for an unknown model kind or hyper-parameter name (cheap: builds nothing)."""
    if kind not in MODEL_CLASSES:
        raise ConfigError(f"model.kind: unknown model kind {kind!r}; valid kinds: {sorted(MODEL_CLASSES)}")
    unknown = sorted(set(hparams) - set(MODEL_DEFAULTS[kind]))
    if unknown:
        raise ConfigError(f"unknown {kind} hyper-parameter(s) {unknown}; "
                          f"valid ones: {sorted(MODEL_DEFAULTS[kind])}")


def resolved_hparams(kind: str, hparams: Dict[str, Any]) -> Dict[str, Any]:
    """``hparams`` checked (:func:`check_model_config`) with ``MODEL_DEFAULTS`` for the unset."""
    check_model_config(kind, hparams)
    return {**MODEL_DEFAULTS[kind], **hparams}


def build_model(kind: str, vocab_size: int,
                activation_quantization: Optional[ActivationQuantization] = None,
                source_vocab_size: Optional[int] = None, **hparams: Any) -> keras.Model:
    """A new model of ``kind`` ("transformer" or "gnmt"); unset hparams take ``MODEL_DEFAULTS``;
    ``activation_quantization`` log-quantises its matmul inputs (None: off);
    ``source_vocab_size``: separate vocabularies (the source's size; None: shared).

    Raises ConfigError for an unknown kind or hyper-parameter, or a value the model rejects.
    """
    resolved = resolved_hparams(kind, hparams)
    try:
        return MODEL_CLASSES[kind](vocab_size, **resolved,
                                   activation_quantization=activation_quantization,
                                   source_vocab_size=source_vocab_size)
    except ValueError as err:  # the layers' own checks of hyper-parameter values
        raise ConfigError(f"model ({kind}): {err}") from err


__all__ = ["build_model", "check_model_config", "resolved_hparams", "MODEL_DEFAULTS", "MODEL_CLASSES", "Transformer", "GNMT"]
