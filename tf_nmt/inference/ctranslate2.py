"""Translation with a CTranslate2 export: :class:`CTranslate2Translator` (SentencePiece +
``ctranslate2``), its thread layout and length-sorted batching. Never imports TensorFlow.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from tf_nmt.data.prepared import vocab_fingerprint
from tf_nmt.errors import UserError
from tf_nmt.inference.formats import (MAX_DECODE_LENGTH, MAX_SOURCE_LENGTH, METADATA_FILE,
                                      SOURCE_VOCAB_FILE, VMAP_FILE, VOCAB_FILE,
                                      CTranslate2ExportError)
from tf_nmt.utils.machine import usable_cores


def _import_ctranslate2(use_mkl: Optional[bool] = None, cpu_isa: Optional[str] = None):
    """``ctranslate2`` with its CPU backend chosen first (:mod:`tf_nmt.inference.ct2_backend`)."""
    from tf_nmt.inference.ct2_backend import import_ctranslate2

    return import_ctranslate2(use_mkl, cpu_isa)


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
        use_mkl, cpu_isa: CTranslate2's CPU backend (:mod:`tf_nmt.inference.ct2_backend`; None: the
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

        from tf_nmt.inference.ct2_backend import applied, with_system_report

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
