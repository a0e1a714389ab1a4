"""CTranslate2 export of a Transformer run, and translation with the exported directory.

The model is described with CTranslate2's own specification API
(:class:`ctranslate2.specs.TransformerSpec`) and written by its converter
(:class:`ctranslate2.converters.Converter`), so the file format is CTranslate2's; this module
only maps tf-nmt's weights onto the spec. The mapping (Keras ``Dense`` kernels are
``[in, out]``, CTranslate2 linear weights ``[out, in]``, hence the transposes):

* embeddings: the shared ``[V, d]`` matrix for the encoder and decoder inputs (separate
  vocabularies: the model's source table for the encoder's), scaled by
  ``sqrt(d)`` (the spec's ``scale_embeddings``, as :class:`SharedEmbedding`); the output
  projection is the (tied or own) output matrix with the output bias. Identical arrays are
  stored once (CTranslate2 aliases them).
* positions: tf-nmt's sinusoidal table (sin half then cos half, positions from 0) written as
  the spec's position encodings, :data:`MAX_POSITIONS` rows.
* self-attention: the fused ``qkv`` projection is CTranslate2's fused ``linear[0]`` (q, k, v
  blocks in the same order), ``out`` is ``linear[1]``; cross-attention: ``q`` -> ``linear[0]``,
  the fused ``kv`` -> ``linear[1]``, ``out`` -> ``linear[2]``. Queries are scaled by
  ``depth ** -0.5`` in both.
* layer norms (epsilon 1e-6): each residual's norm is the sub-layer's ``layer_norm``;
  CTranslate2's ``pre_norm`` flag follows ``model.norm`` and pre-norm stacks get the final
  encoder/decoder norms.
* vocabulary: the run's SentencePiece pieces in id order, shared by source and target, so ids
  are identical (pad=0 ``<pad>``, unk=1 ``<unk>``, bos=2 ``<s>``, eos=3 ``</s>``); separate
  vocabularies register each side's own pieces (the specials at the same ids) and write both
  models, ``source_vocab.model`` next to ``vocab.model``. The decoder
  starts from ``<s>``, stops at ``</s>``, and ``</s>`` is appended to every source
  (``add_source_eos``), as tf-nmt does. tf-nmt's search never emits pad or bos: the exported
  output bias carries tf-nmt's -1e9 on those two rows, so CTranslate2 never does either.

Decoding options that cannot be matched exactly: CTranslate2's length penalty divides a
hypothesis' log-probability by ``length ** alpha``, tf-nmt's beam search by the GNMT
``((5 + length) / 6) ** alpha``; greedy search (beam 1) is unaffected.
"""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from tf_nmt.data.prepared import BUILTIN_LANGUAGES
from tf_nmt.errors import UserError
from tf_nmt.inference.ctranslate2 import _import_ctranslate2
from tf_nmt.inference.formats import (BOS_ID, EOS_ID, MAX_DECODE_LENGTH, MAX_POSITIONS, NEG,
                                      MAX_SOURCE_LENGTH, METADATA_FILE, PAD_ID, QUANTIZATIONS,
                                      SOURCE_VOCAB_FILE, SPECIAL_TOKENS, UNK_ID, VMAP_FILE,
                                      VOCAB_FILE, CTranslate2ExportError)
from tf_nmt.utils.io import replace_directory_atomically, staging_directory


def vocabulary_tokens(model_proto: bytes) -> List[str]:
    """The SentencePiece pieces in id order, checked to hold tf-nmt's special tokens at their ids."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_proto=model_proto)
    tokens = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    for index, token in SPECIAL_TOKENS.items():
        if tokens[index] != token:
            raise CTranslate2ExportError(f"vocabulary id {index} is {tokens[index]!r}, expected "
                                         f"{token!r}; CTranslate2 finds the specials by name")
    if len(set(tokens)) != len(tokens):
        raise CTranslate2ExportError("the vocabulary has duplicate pieces; CTranslate2 maps "
                                     "tokens by string")
    return tokens


def position_table(rows: int, dim: int) -> np.ndarray:
    """tf-nmt's sinusoidal encodings (:func:`tf_nmt.models.embedding.sinusoidal_positions`) for
    positions 0..rows-1, computed the same way in float32."""
    inv_freq = np.exp(-math.log(10000.0) * np.arange(dim // 2) * 2.0 / dim).astype(np.float32)
    angles = np.arange(rows, dtype=np.float32)[:, None] * inv_freq[None, :]
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=-1).astype(np.float32)


def _linear(spec, dense) -> None:
    spec.weight = np.ascontiguousarray(dense.kernel.numpy().T)
    if dense.bias is not None:
        spec.bias = dense.bias.numpy()


def _norm(spec, norm) -> None:
    spec.gamma = norm.gamma.numpy()
    spec.beta = norm.beta.numpy()


def build_spec(model, tokens: List[str], source_tokens: Optional[List[str]] = None):
    """The :class:`ctranslate2.specs.TransformerSpec` holding ``model``'s weights (``tokens``:
    the target's pieces; ``source_tokens``: the source's, None when shared)."""
    _import_ctranslate2()
    from ctranslate2.specs import transformer_spec

    if getattr(model, "activation_quantization", None) is not None:
        raise CTranslate2ExportError("the run log-quantises its matmul inputs "
                                     "(train.quantize_activations_bits); CTranslate2 cannot")
    hp = model.get_config()
    pre_norm = hp["norm"] == "pre"
    spec = transformer_spec.TransformerSpec(
        transformer_spec.TransformerEncoderSpec(len(model.encoder_layers), model.num_heads,
                                                pre_norm=pre_norm),
        transformer_spec.TransformerDecoderSpec(len(model.decoder_layers), model.num_heads,
                                                pre_norm=pre_norm))
    emb = model.embedding
    embeddings = emb.embeddings.numpy()
    positions = position_table(MAX_POSITIONS, model.d_model)

    source_emb = getattr(model, "source_embedding", None)
    source_emb = emb if source_emb is None else source_emb
    if (source_emb is emb) != (source_tokens is None):
        raise CTranslate2ExportError("the model's source embedding and the run's vocabularies "
                                     "disagree (one shared, the other separate)")

    enc = spec.encoder
    enc.embeddings[0].weight = embeddings if source_emb is emb else source_emb.embeddings.numpy()
    enc.scale_embeddings = source_emb.scale is not None
    enc.position_encodings.encodings = positions
    for layer_spec, layer in zip(enc.layer, model.encoder_layers):
        _linear(layer_spec.self_attention.linear[0], layer.attention.qkv)
        _linear(layer_spec.self_attention.linear[1], layer.attention.out)
        _norm(layer_spec.self_attention.layer_norm, layer.res1.norm)
        _linear(layer_spec.ffn.linear_0, layer.ffn.inner)
        _linear(layer_spec.ffn.linear_1, layer.ffn.outer)
        _norm(layer_spec.ffn.layer_norm, layer.res2.norm)
    if pre_norm:
        _norm(enc.layer_norm, model.encoder_norm)

    dec = spec.decoder
    dec.embeddings.weight = embeddings
    dec.scale_embeddings = emb.scale is not None
    dec.position_encodings.encodings = positions
    for layer_spec, layer in zip(dec.layer, model.decoder_layers):
        _linear(layer_spec.self_attention.linear[0], layer.self_attention.qkv)
        _linear(layer_spec.self_attention.linear[1], layer.self_attention.out)
        _norm(layer_spec.self_attention.layer_norm, layer.res1.norm)
        _linear(layer_spec.attention.linear[0], layer.cross_attention.q)
        _linear(layer_spec.attention.linear[1], layer.cross_attention.kv)
        _linear(layer_spec.attention.linear[2], layer.cross_attention.out)
        _norm(layer_spec.attention.layer_norm, layer.res2.norm)
        _linear(layer_spec.ffn.linear_0, layer.ffn.inner)
        _linear(layer_spec.ffn.linear_1, layer.ffn.outer)
        _norm(layer_spec.ffn.layer_norm, layer.res3.norm)
    if pre_norm:
        _norm(dec.layer_norm, model.decoder_norm)
    dec.projection.weight = emb.output_embeddings.numpy()
    bias = (emb.bias.numpy() if emb.bias is not None
            else np.zeros([emb.vocab_size], np.float32)).copy()
    bias[[PAD_ID, BOS_ID]] += NEG  # tf-nmt's search never emits pad or bos
    dec.projection.bias = bias

    spec.config.unk_token, spec.config.bos_token = SPECIAL_TOKENS[UNK_ID], SPECIAL_TOKENS[BOS_ID]
    spec.config.eos_token = SPECIAL_TOKENS[EOS_ID]
    spec.config.decoder_start_token = SPECIAL_TOKENS[BOS_ID]
    spec.config.add_source_bos = False
    spec.config.add_source_eos = True  # tf-nmt appends </s> to every source
    spec.config.layer_norm_epsilon = 1e-6
    spec.register_source_vocabulary(tokens if source_tokens is None else source_tokens)
    spec.register_target_vocabulary(tokens)
    return spec


def export_ctranslate2(model, tokenizer, cfg, export_dir: Path, quantization: str = "float32",
                       overwrite: bool = False, run_dir: Optional[Path] = None,
                       checkpoint: Optional[str] = None, weights: Optional[str] = None,
                       languages: Sequence[str] = BUILTIN_LANGUAGES,
                       vmap: Optional[Tuple[str, Dict[str, Any]]] = None) -> Path:
    """Write a CTranslate2 model directory for a Transformer run: ``model.bin``, ``config.json``,
    ``shared_vocabulary.json`` (CTranslate2's; separate vocabularies: ``source_vocabulary.json``
    and ``target_vocabulary.json``), the run's SentencePiece ``vocab.model`` (``tokenizer``:
    the shared one, or separate :class:`~tf_nmt.data.tokenizer.TokenizerPair`, whose source
    model is also written, as ``source_vocab.model``) and
    ``tf_nmt_export.json`` (``languages``: the run's (source, target); vocabulary ids, decoding
    defaults, provenance). ``vmap``: (text, summary) of a vocabulary map
    (:func:`tf_nmt.export.ct2_vmap.build_vmap`), written as CTranslate2's ``vmap.txt`` and used
    by :class:`CTranslate2Translator` unless told not to. Staged next to ``export_dir`` and
    renamed into place; an existing directory only with ``overwrite``."""
    export_dir = Path(export_dir)
    if export_dir.exists() and not overwrite:  # refuse before converting anything
        raise FileExistsError(f"{export_dir} exists; pass --overwrite to replace it")
    if quantization not in QUANTIZATIONS:
        raise UserError(f"--quantization must be one of {', '.join(QUANTIZATIONS)}, "
                        f"got {quantization!r}")
    if cfg.model.kind != "transformer":
        raise CTranslate2ExportError(f"cannot export a {cfg.model.kind} run to CTranslate2: "
                                     "CTranslate2 has no LSTM decoder")
    ctranslate2 = _import_ctranslate2()
    target = getattr(tokenizer, "target", tokenizer)  # TokenizerPair or one shared tokenizer
    source = getattr(tokenizer, "source", tokenizer)
    shared = source is target
    tokens = vocabulary_tokens(target.model_proto)
    source_tokens = None if shared else vocabulary_tokens(source.model_proto)
    spec = build_spec(model, tokens, source_tokens)

    class _SpecConverter(ctranslate2.converters.Converter):
        def _load(self):
            return spec

    hp = model.get_config()
    metadata = {
        "format": "ctranslate2", "ctranslate2_version": ctranslate2.__version__,
        "model_kind": cfg.model.kind, "source_language": languages[0], "target_language": languages[1],
        "quantization": quantization, "norm": hp["norm"],
        "tie_embeddings": bool(hp.get("tie_embeddings", True)),
        "shared_vocabulary": shared, "vocab_size": len(tokens), "vocab_file": VOCAB_FILE,
        "vocab_fingerprint": target.fingerprint,
        **({} if shared else {"source_vocab_size": len(source_tokens),
                              "source_vocab_file": SOURCE_VOCAB_FILE,
                              "source_vocab_fingerprint": source.fingerprint}),
        "special_ids": {"pad": PAD_ID, "unk": UNK_ID, "bos": BOS_ID, "eos": EOS_ID},
        "special_tokens": {str(i): t for i, t in SPECIAL_TOKENS.items()},
        "add_source_eos": True, "decoder_start_token": SPECIAL_TOKENS[BOS_ID],
        "suppressed_target_ids": [PAD_ID, BOS_ID],
        "max_positions": MAX_POSITIONS, "max_source_length": MAX_SOURCE_LENGTH,
        "max_decoding_length": MAX_DECODE_LENGTH,
        "beam_size": cfg.decode.beam_size, "length_penalty": cfg.decode.length_penalty,
        "run_dir": str(Path(run_dir).resolve()) if run_dir is not None else None,
        "checkpoint": checkpoint, "weights": weights,
        "vocabulary_map": None if vmap is None else {"file": VMAP_FILE, **vmap[1]},
    }
    export_dir.parent.mkdir(parents=True, exist_ok=True)
    staged = staging_directory(export_dir)
    try:
        out = staged / "model"
        vmap_path = None
        if vmap is not None:
            vmap_path = staged / VMAP_FILE
            vmap_path.write_text(vmap[0], encoding="utf-8")
        _SpecConverter().convert(str(out), vmap=None if vmap_path is None else str(vmap_path),
                                 quantization=quantization, force=True)
        (out / VOCAB_FILE).write_bytes(target.model_proto)
        if not shared:
            (out / SOURCE_VOCAB_FILE).write_bytes(source.model_proto)
        (out / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n")
        replace_directory_atomically(out, export_dir, overwrite)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return export_dir
