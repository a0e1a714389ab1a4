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
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from tf_nmt.data.prepared import BUILTIN_LANGUAGES, vocab_fingerprint
from tf_nmt.errors import UserError
from tf_nmt.export.ct2_vmap import VMAP_FILE
from tf_nmt.utils.io import replace_directory_atomically, staging_directory
from tf_nmt.utils.machine import usable_cores

# tf-nmt's fixed ids (tf_nmt.models.base), its search's score for banned tokens and decoding
# limit (tf_nmt.models.decoding), repeated so that translating with an export never imports
# TensorFlow (tests/export/test_ctranslate2.py checks they agree).
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
NEG = -1e9
MAX_DECODE_LENGTH = 256

#: ``--quantization`` choices: CTranslate2's weight types at conversion.
QUANTIZATIONS = ("float32", "int8", "int8_float32")
#: Rows of the exported position table (CTranslate2 truncates inputs to 1024 tokens by default).
MAX_POSITIONS = 1024
#: Source tokens kept before the appended ``</s>`` (what tf-nmt's translate keeps: 256 - 1).
MAX_SOURCE_LENGTH = 256
METADATA_FILE = "tf_nmt_export.json"
VOCAB_FILE = "vocab.model"  # the target's (and the shared) SentencePiece model
SOURCE_VOCAB_FILE = "source_vocab.model"  # separate vocabularies only
SPECIAL_TOKENS = {PAD_ID: "<pad>", UNK_ID: "<unk>", BOS_ID: "<s>", EOS_ID: "</s>"}


class CTranslate2ExportError(UserError, ValueError):
    """The run cannot be exported to CTranslate2 (e.g. a GNMT run)."""


def is_ctranslate2_dir(path: Path) -> bool:
    """True for a directory this module exported (CTranslate2 model + tf-nmt metadata)."""
    return (Path(path) / "model.bin").is_file() and (Path(path) / METADATA_FILE).is_file()


def _import_ctranslate2(use_mkl: Optional[bool] = None, cpu_isa: Optional[str] = None):
    """``ctranslate2`` with its CPU backend chosen first (:mod:`tf_nmt.export.ct2_backend`)."""
    from tf_nmt.export.ct2_backend import import_ctranslate2

    return import_ctranslate2(use_mkl, cpu_isa)


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
    the shared one, or separate :class:`~tf_nmt.data.tokenizer.Vocabularies`, whose source
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
    target = getattr(tokenizer, "target", tokenizer)  # Vocabularies or one shared tokenizer
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


def max_decoding_length(source_lengths: Iterable[int]) -> int:
    """tf-nmt's default limit for a batch (:func:`tf_nmt.models.decoding.default_max_length`):
    ``min(2 * longest source (with </s>) + 10, 256)``."""
    return min(2 * max(source_lengths, default=0) + 10, MAX_DECODE_LENGTH)


#: How a translator uses the CPU cores when no threads are given: ``"inter"``, one translator
#: per core, each batch dealt across them; ``"intra"``, one translator with a thread per core.
#: Measured on the quickstart model, 2-core AMD Zen 4, beam 4, 32 mixed sentences per request:
#: int8 514 sentences/s with "inter" against 130 with "intra" (1 per request: 178 against 18),
#: experiments/serving_speed/results/serving_engines_levers.json (docs/serving.md).
DEFAULT_LAYOUT = "inter"


def thread_layout(intra_threads: int, inter_threads: int, device: str = "cpu"
                  ) -> Tuple[int, int, str]:
    """(intra_threads, inter_threads, where they came from): the given ones (a missing one
    filled so that both use the usable cores), else :data:`DEFAULT_LAYOUT` over the cores."""
    cores = usable_cores()
    if intra_threads or inter_threads:
        inter = inter_threads or 1
        return intra_threads or max(1, cores // inter), inter, "given"
    if device != "cpu":
        return 0, 1, "ctranslate2's default"
    if DEFAULT_LAYOUT == "inter":
        return 1, cores, f"default: one translator per usable core ({cores})"
    return cores, 1, f"default: one translator, a thread per usable core ({cores})"


class CTranslate2Translator:
    """Raw strings -> translations with an exported directory (SentencePiece + ctranslate2).

    Args:
        export_dir: a directory written by :func:`export_ctranslate2`.
        device: ``"cpu"``, ``"cuda"`` or ``"auto"``.
        compute_type: CTranslate2's compute type (default: the exported weights' type).
        intra_threads: threads per translator (0: :data:`DEFAULT_LAYOUT` over the usable cores).
        inter_threads: translators decoding parts of a batch in parallel (0: as intra_threads).
        use_mkl, cpu_isa: CTranslate2's CPU backend (:mod:`tf_nmt.export.ct2_backend`; None: the
            environment's, else the measured default for this CPU, else CTranslate2's).
        use_vmap: restrict each batch's output layer to the export's vocabulary map (None: when
            the export has one; True without one is an error).

    ``settings`` records what was used (threads, compute type, backend and where each setting
    came from, the ISA and GEMM backends CTranslate2 reports selecting, vocabulary map);
    :meth:`describe` is that as one line.
    """

    def __init__(self, export_dir: Path, device: str = "cpu", compute_type: str = "default",
                 intra_threads: int = 0, inter_threads: int = 0, use_mkl: Optional[bool] = None,
                 cpu_isa: Optional[str] = None, use_vmap: Optional[bool] = None) -> None:
        import sentencepiece as spm

        from tf_nmt.export.ct2_backend import applied, with_system_report

        if intra_threads < 0 or inter_threads < 0:
            raise UserError(f"CTranslate2 threads must be >= 0 (got intra {intra_threads}, "
                            f"inter {inter_threads})")
        export_dir = Path(export_dir)
        has_vmap = (export_dir / VMAP_FILE).is_file()
        if use_vmap and not has_vmap:
            raise UserError(f"{export_dir} has no vocabulary map ({VMAP_FILE}); export it with "
                            "`tf-nmt export --format ctranslate2 --vmap`, or drop --vmap")
        ctranslate2 = _import_ctranslate2(use_mkl, cpu_isa)
        self.metadata = json.loads((export_dir / METADATA_FILE).read_text())
        self.sp = self._model(spm, export_dir, VOCAB_FILE, "vocab_fingerprint")  # target/shared
        self.source_sp = (self.sp if self.metadata.get("shared_vocabulary", True) else
                          self._model(spm, export_dir, SOURCE_VOCAB_FILE,
                                      "source_vocab_fingerprint"))
        self.tokens = [self.source_sp.id_to_piece(i)  # the source's pieces, by id
                       for i in range(self.source_sp.get_piece_size())]
        intra, inter, layout = thread_layout(intra_threads, inter_threads, device)
        self.use_vmap = has_vmap if use_vmap is None else use_vmap
        self.translator, selected = with_system_report(ctranslate2, lambda: ctranslate2.Translator(
            str(export_dir), device=device, compute_type=compute_type, intra_threads=intra,
            inter_threads=inter))
        self.settings: Dict[str, Any] = {
            "device": device, "compute_type": self.translator.compute_type,
            "quantization": self.metadata.get("quantization"),
            "threads": {"intra_threads": intra, "inter_threads": self.translator.num_translators,
                        "source": layout},
            "backend": applied(), "selected": selected, "vocabulary_map": self.use_vmap,
            "ctranslate2_version": ctranslate2.__version__}

    def describe(self) -> str:
        """The settings in one line (what ``tf-nmt translate`` prints on stderr)."""
        s, b = self.settings, self.settings["backend"] or {}
        threads = s["threads"]
        parts = [f"{s['compute_type']} on {s['device']}",
                 f"{threads['inter_threads']} translator(s) x {threads['intra_threads']} "
                 f"thread(s) ({threads['source']})"]
        for env in ("CT2_USE_MKL", "CT2_FORCE_CPU_ISA"):
            if env in b:
                parts.append(f"{env}={b[env] or 'unset'} ({b[env + '_source']})")
        chosen = s["selected"]
        if chosen:
            parts.append(f"ISA {chosen.get('isa', '?')}, GEMM {chosen.get('sgemm', '?')}, "
                         f"int8 GEMM {chosen.get('gemm_s8', '?')}")
        parts.append("vocabulary map " + ("on" if s["vocabulary_map"] else "off"))
        return "ctranslate2: " + ", ".join(parts)

    def _model(self, spm, export_dir: Path, name: str, key: str):
        """The SentencePiece model ``name``, refused when it is not the one exported."""
        path = export_dir / name
        if not path.is_file():
            raise CTranslate2ExportError(f"{path}: missing from the CTranslate2 export; export "
                                         "the run again")
        proto = path.read_bytes()
        recorded = self.metadata.get(key)
        if recorded is not None and vocab_fingerprint(proto) != recorded:
            raise CTranslate2ExportError(f"{path}: vocabulary {vocab_fingerprint(proto)}, but the model "
                                         f"was exported with {recorded}; export the run again")
        return spm.SentencePieceProcessor(model_proto=proto)

    def source_tokens(self, texts: Sequence[str]) -> List[List[str]]:
        """Pieces of each source, truncated as tf-nmt does (CTranslate2 appends ``</s>``)."""
        keep = self.metadata.get("max_source_length", MAX_SOURCE_LENGTH) - 1
        return [[self.tokens[i] for i in ids[:keep]]
                for ids in self.source_sp.encode(list(texts))]

    def translate_tokens(self, batch: List[List[str]], beam_size: int = 1,
                         length_penalty: float = 0.0) -> List[List[int]]:
        """Target ids (without ``</s>``) for a batch of source pieces. With several
        translators, the (length-sorted) batch is dealt round-robin into one part per translator,
        so the parts have alike lengths, and the parts are decoded in parallel. Every part gets
        the whole batch's length limit, as tf-nmt's decoding of that batch would."""
        if not batch:
            return []
        options = dict(beam_size=beam_size, length_penalty=length_penalty,
                       max_input_length=0, num_hypotheses=1, use_vmap=self.use_vmap,
                       max_decoding_length=max_decoding_length(len(s) + 1 for s in batch))
        parts = min(self.translator.num_translators, len(batch))
        groups = [list(range(i, len(batch), parts)) for i in range(parts)]
        pending = [self.translator.translate_batch(
            [batch[i] for i in group], asynchronous=parts > 1, **options) for group in groups]
        out: List[List[int]] = [[] for _ in batch]
        for group, results in zip(groups, pending):
            for i, result in zip(group, results):
                if parts > 1:
                    result = result.result()
                out[i] = [self.sp.piece_to_id(t) for t in result.hypotheses[0]]
        return out

    def translate(self, texts: Sequence[str], beam_size: Optional[int] = None,
                  batch_size: int = 64) -> List[str]:
        """Translations of ``texts`` in their order, decoded in length-sorted batches."""
        return list(translate_sorted(self, texts, beam_size, batch_size))


def translate_sorted(engine: CTranslate2Translator, texts: Sequence[str],
                     beam_size: Optional[int] = None, batch_size: int = 64,
                     progress: Optional[Callable[[int], None]] = None) -> Iterator[str]:
    """Translations in input order; the sentences are decoded in length-sorted batches and
    ``progress(n)`` is called after each batch with the number of sentences it held."""
    beam = beam_size or engine.metadata.get("beam_size", 4)
    penalty = engine.metadata.get("length_penalty", 0.6) if beam > 1 else 0.0
    pieces = engine.source_tokens(texts)
    order = sorted(range(len(texts)), key=lambda i: len(pieces[i]))
    outputs: Dict[int, str] = {}
    for start in range(0, len(order), batch_size):
        index = order[start:start + batch_size]
        ids = engine.translate_tokens([pieces[i] for i in index], beam, penalty)
        for i, hyp in zip(index, ids):
            outputs[i] = engine.sp.decode(hyp)
        if progress is not None:
            progress(len(index))
    for i in range(len(texts)):
        yield outputs[i]


class Progress:
    """Sentences translated and sentences per second on stderr: a tqdm bar where tqdm is
    installed, otherwise one line rewritten at most every ``interval`` seconds."""

    def __init__(self, total: Optional[int] = None, interval: float = 1.0, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.count, self.total, self.interval = 0, total, interval
        self.start = self.last = time.perf_counter()
        try:
            from tqdm import tqdm
        except ImportError:
            self.bar = None
        else:
            self.bar = tqdm(total=total, unit=" sentences", file=self.stream, dynamic_ncols=True)

    def __call__(self, n: int) -> None:
        self.count += n
        if self.bar is not None:
            self.bar.update(n)
            return
        now = time.perf_counter()
        if now - self.last >= self.interval:
            self.last = now
            self._line("\r")

    def _line(self, end: str) -> None:
        rate = self.count / max(time.perf_counter() - self.start, 1e-9)
        of = f"/{self.total}" if self.total is not None else ""
        self.stream.write(f"{end}translated {self.count}{of} sentences ({rate:.1f} sentences/s)")
        self.stream.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        else:
            self._line("\r")
            self.stream.write("\n")
            self.stream.flush()
