"""SavedModel export: a serving signature from raw source-language strings to target-language
strings (the run's language pair, kept in the export: ``translator.languages()`` returns
``{"source": b"en", "target": b"de"}``).

Tokenisation (tensorflow-text SentencePiece), beam search and detokenisation all run inside the
graph, so a client needs only ``tensorflow`` and ``tensorflow_text``::

    import tensorflow as tf, tensorflow_text  # noqa: F401 (registers the SentencePiece ops)
    translator = tf.saved_model.load(path)
    translator.signatures["serving_default"](texts=tf.constant(["Open the file."]))

The export is written to a temporary sibling directory and renamed into place; an existing
export is never replaced unless ``overwrite`` is set.

A model trained with log-quantised matmul inputs (``train.quantize_activations_bits``) is traced
with the stock-op quantiser (:class:`tf_nmt.models.activation_quant.StockOpsEngine`), bit for
bit what evaluation computes with the C++ op, so the SavedModel needs no tf_nmt op library.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence

from tf_nmt.compat import keras, tf
from tf_nmt.data.prepared import BUILTIN_LANGUAGES
from tf_nmt.data.tokenizer import Tokenizers, TokenizerPair
from tf_nmt.inference.serving_graph import make_translate_fn
from tf_nmt.inference.formats import EXPORT_WEIGHTS_RECORD, SERVING_CHUNK_SIZE
from tf_nmt.models.activation_quant import use_engine
from tf_nmt.utils.io import replace_directory_atomically, staging_directory, write_json_atomic


def language_pair_function(languages: Sequence[str]):
    """The export's ``languages()``: ``{"source", "target"}`` codes of the run's pair, as a
    function so that the SavedModel keeps them without adding variables."""
    source_language, target_language = str(languages[0]), str(languages[1])

    @tf.function(input_signature=[])
    def language_pair():
        return {"source": tf.constant(source_language), "target": tf.constant(target_language)}

    return language_pair


class Translator(tf.Module):
    """The exported object: model + tokenizer(s) + a string-to-string ``translate`` function."""

    def __init__(self, model: keras.Model, tokenizer: Tokenizers, beam_size: int,
                 length_penalty: float, max_source_length: int = 256,
                 chunk_size: int = SERVING_CHUNK_SIZE,
                 languages: Sequence[str] = BUILTIN_LANGUAGES) -> None:
        super().__init__(name="translator")
        self.model = model
        self.languages = language_pair_function(languages)
        attach_tokenizers(self, tokenizer)
        self.beam_size = tf.constant(beam_size)
        self.chunk_size = tf.constant(chunk_size)
        translate = make_translate_fn(model, tokenizer, beam_size, length_penalty, max_source_length,
                                      chunk_size)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="texts")])
        def serve(texts: tf.Tensor):
            return {"translations": translate(texts)}

        self.serve = serve


def attach_tokenizers(module: tf.Module, tokenizer: Tokenizers) -> None:
    """Keep the tokenizer(s) on the exported ``module`` (their models become part of the
    SavedModel): ``tokenizer`` (the target's, or the shared one) and, with separate
    vocabularies, ``source_tokenizer``."""
    vocab = TokenizerPair.of(tokenizer)
    module.tokenizer = vocab.target
    if not vocab.shared:
        module.source_tokenizer = vocab.source


def directory_bytes(path: Path) -> int:
    """Total size of the files under ``path`` (an export's size on disk)."""
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def save_translator(translator: tf.Module, export_dir: Path, overwrite: bool = False,
                    record: Optional[Mapping[str, Any]] = None) -> Path:
    """Save ``translator`` (its ``serve`` function as ``serving_default``) to a temporary sibling
    directory and rename it into place; an existing export is replaced only with ``overwrite``.
    ``record``: what the export holds (weights, run, checkpoint, languages...), written inside
    it as :data:`~tf_nmt.inference.formats.EXPORT_WEIGHTS_RECORD` before the rename."""
    export_dir = Path(export_dir)
    if export_dir.exists() and not overwrite:
        raise FileExistsError(f"{export_dir} exists; pass --overwrite to replace it")
    export_dir.parent.mkdir(parents=True, exist_ok=True)
    staged = staging_directory(export_dir)
    try:
        with use_engine("emulated-stock"):  # stock ops only: loads without the tf_nmt op library
            tf.saved_model.save(translator, str(staged / "model"),
                                signatures={"serving_default": translator.serve})
        if record is not None:
            write_json_atomic(staged / "model" / EXPORT_WEIGHTS_RECORD, dict(record))
        replace_directory_atomically(staged / "model", export_dir, overwrite)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return export_dir


def export_saved_model(model: keras.Model, tokenizer: Tokenizers, export_dir: Path,
                       beam_size: int = 4, length_penalty: float = 0.6,
                       overwrite: bool = False, chunk_size: int = SERVING_CHUNK_SIZE,
                       languages: Sequence[str] = BUILTIN_LANGUAGES,
                       record: Optional[Mapping[str, Any]] = None) -> Path:
    """Write a SavedModel with a ``serving_default`` signature ``texts -> translations``
    (``chunk_size``: each request decoded in length-sorted chunks of that many sentences, 0: whole;
    ``languages``: the run's (source, target), returned by the export's ``languages()``;
    ``record``: the weights it holds and where they come from, see :func:`export_record`)."""
    if Path(export_dir).exists() and not overwrite:  # refuse before building anything
        raise FileExistsError(f"{export_dir} exists; pass --overwrite to replace it")
    return save_translator(Translator(model, tokenizer, beam_size, length_penalty,
                                      chunk_size=chunk_size, languages=languages),
                           export_dir, overwrite, record)


def export_record(weights: Optional[str], run_dir: Optional[Path], checkpoint: Optional[str],
                  languages: Sequence[str], **extra: Any) -> Dict[str, Any]:
    """An export's :data:`~tf_nmt.inference.formats.EXPORT_WEIGHTS_RECORD`: which weights
    (raw or EMA) of which run and checkpoint, in which languages (``extra``: more keys)."""
    return {"weights": weights, "run_dir": None if run_dir is None else str(run_dir),
            "checkpoint": checkpoint, "languages": list(languages), **extra}
