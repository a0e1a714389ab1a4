"""Between training runs and packed models: quantise a run's checkpoint, and rebuild a model
(float32, holding the dequantised weights) with its tokenizer and config from a packed file."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from tf_nmt.compat import keras
from tf_nmt.config import Config, config_from_dict
from tf_nmt.data.tokenizer import SubwordTokenizer
from tf_nmt.models.activation_quant import from_train_config
from tf_nmt.quantization.packed_file import PackedFileError, PackedModel
from tf_nmt.quantization.policy import QuantPolicy
from tf_nmt.quantization.quantize import (assign_entries, model_weights, quantize_weights,
                                          size_report)
from tf_nmt.run_dir import RunDir, build_initialised_model, load_trained_checkpoint


def quantize_run(run_dir: Path, policy: QuantPolicy, checkpoint: Optional[str] = None,
                 weights: str = "raw") -> Tuple[PackedModel, Dict[str, Any]]:
    """Quantise a trained run's checkpoint (``weights``: ``"raw"`` or ``"ema"``, its moving
    average; recorded in the packed file's info and the report): (packed model, report)."""
    run = RunDir(Path(run_dir))
    model, _, cfg, source = load_trained_checkpoint(run.root, checkpoint, weights)
    names, arrays = model_weights(model)
    entries = quantize_weights(names, arrays, policy)
    packed = PackedModel(policy, entries, cfg.to_dict(), run.vocab_path.read_bytes(),
                         info={"source_checkpoint": str(source), "weights": weights,
                               "languages": list(run.languages())})
    report = size_report(entries, policy, arrays)
    report["weights"] = weights
    return packed, report


def model_from_packed(packed: PackedModel) -> Tuple[keras.Model, SubwordTokenizer, Config]:
    """(float32 model holding the dequantised weights, tokenizer, config) of a packed model."""
    if not packed.config or not packed.vocab_proto:
        raise PackedFileError("this packed model carries no config/vocabulary, so it cannot be rebuilt")
    cfg = config_from_dict(packed.config)
    tokenizer = SubwordTokenizer(packed.vocab_proto)
    model = build_initialised_model(cfg.model.kind, tokenizer.vocab_size, cfg.model.hparams,
                                    activation_quantization=from_train_config(cfg.train))
    assign_entries(model, packed.entries, packed.policy)
    return model, tokenizer, cfg

