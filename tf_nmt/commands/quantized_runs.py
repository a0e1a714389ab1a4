"""Between training runs and packed models: quantise a run's checkpoint, and rebuild a model
(float32, holding the dequantised weights) with its tokenizer and config from a packed file."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from tf_nmt.compat import keras
from tf_nmt.config import Config, config_from_dict
from tf_nmt.data.tokenizer import SOURCE_TOKENIZER, SubwordTokenizer, Tokenizers, TokenizerPair
from tf_nmt.models.activation_quant import from_train_config
from tf_nmt.quantization.packed_file import PackedFileError, PackedModel
from tf_nmt.quantization.policy import QuantPolicy
from tf_nmt.quantization.quantize import (assign_entries, model_weights, quantize_weights,
                                          size_report)
from tf_nmt.run_dir import RunDir, build_initialised_model, load_run


def quantize_run(run_dir: Path, policy: QuantPolicy, checkpoint: Optional[str] = None,
                 weights: Optional[str] = None) -> Tuple[PackedModel, Dict[str, Any]]:
    """Quantise a trained run's checkpoint (``weights``: ``"raw"``, ``"ema"``, its moving
    average, or None: :func:`tf_nmt.run_dir.choose_weights`; recorded in the packed file's info
    and the report): (packed model, report)."""
    run = RunDir(Path(run_dir))
    loaded = load_run(run.root, checkpoint, weights)
    model, cfg, source, weights = loaded.model, loaded.cfg, loaded.checkpoint, loaded.weights
    names, arrays = model_weights(model)
    entries = quantize_weights(names, arrays, policy)
    separate = run.source_vocab_path.is_file()
    packed = PackedModel(policy, entries, cfg.to_dict(), run.vocab_path.read_bytes(),
                         info={"source_checkpoint": str(source), "weights": weights,
                               "languages": list(run.languages())},
                         source_vocab_proto=run.source_vocab_path.read_bytes() if separate else b"")
    report = size_report(entries, policy, arrays)
    report["weights"] = weights
    return packed, report


def model_from_packed(packed: PackedModel) -> Tuple[keras.Model, Tokenizers, Config]:
    """(float32 model holding the dequantised weights, tokenizer, config) of a packed model;
    the tokenizer is the shared one, or the :class:`TokenizerPair` of separate ones."""
    if not packed.config or not packed.vocab_proto:
        raise PackedFileError("this packed model carries no config/vocabulary, so it cannot be rebuilt")
    cfg = config_from_dict(packed.config)
    target = SubwordTokenizer(packed.vocab_proto)
    vocab = TokenizerPair(SubwordTokenizer(packed.source_vocab_proto, SOURCE_TOKENIZER)
                         if packed.source_vocab_proto else target, target)
    model = build_initialised_model(cfg.model.kind, target.vocab_size, cfg.model.hparams,
                                    activation_quantization=from_train_config(cfg.train),
                                    source_vocab_size=vocab.source_vocab_size)
    assign_entries(model, packed.entries, packed.policy)
    return model, vocab.as_tokenizer(), cfg

