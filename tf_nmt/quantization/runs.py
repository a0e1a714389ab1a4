"""Between training runs and packed models: quantise a run's checkpoint, and rebuild a model
(float32, holding the dequantised weights) with its tokenizer and config from a packed file."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from tf_nmt.compat import tf
from tf_nmt.quantization.packed_file import PackedModel
from tf_nmt.quantization.policy import QuantPolicy
from tf_nmt.quantization.quantize import (assign_entries, model_weights, quantize_weights,
                                          size_report)


def quantize_run(run_dir: Path, policy: QuantPolicy, checkpoint: Optional[str] = None
                 ) -> Tuple[PackedModel, Dict[str, Any]]:
    """Quantise a trained run's checkpoint: (packed model, size/error report)."""
    from tf_nmt.training.run_dir import RunDir
    from tf_nmt.training.trainer import load_trained_model

    model, _, cfg = load_trained_model(Path(run_dir), checkpoint)
    names, arrays = model_weights(model)
    entries = quantize_weights(names, arrays, policy)
    source = checkpoint or tf.train.latest_checkpoint(str(RunDir(Path(run_dir)).checkpoints))
    packed = PackedModel(policy, entries, cfg.to_dict(), RunDir(Path(run_dir)).vocab_path.read_bytes(),
                         info={"source_checkpoint": str(source)})
    return packed, size_report(entries, policy, arrays)


def model_from_packed(packed: PackedModel):
    """(float32 model holding the dequantised weights, tokenizer, config) of a packed model."""
    from tf_nmt.config import config_from_dict
    from tf_nmt.data.tokenizer import SubwordTokenizer
    from tf_nmt.models import build_model

    if not packed.config or not packed.vocab_proto:
        raise ValueError("this packed model carries no config/vocabulary, so it cannot be rebuilt")
    cfg = config_from_dict(packed.config)
    tokenizer = SubwordTokenizer(packed.vocab_proto)
    model = build_model(cfg.model.kind, tokenizer.vocab_size, **cfg.model.hparams)
    model({"source": tf.ones([1, 4], tf.int32), "target_in": tf.ones([1, 4], tf.int32)})
    assign_entries(model, packed.entries, packed.policy)
    return model, tokenizer, cfg

