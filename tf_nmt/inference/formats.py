"""What a reader of a tf-nmt export needs to know of its files: the SavedModel's weights
record and decoding chunk size, and the CTranslate2 directory's file names, ids and limits.

One home for the export formats: the exporters (:mod:`tf_nmt.export`) write these files, the
translators (:mod:`tf_nmt.inference`) read them. Nothing here imports TensorFlow.
"""
from __future__ import annotations

from pathlib import Path

from tf_nmt.errors import UserError

#: Sentences per length-sorted chunk that a SavedModel export decodes at a time (``tf-nmt export
#: --chunk-size``; 0 decodes each request whole). 16 is the measured best on the quickstart model
#: (``experiments/serving_speed/results/serving_speed_chunks.json``): 1.23-1.59x the unchunked export for mixed-length
#: requests of 32-64 sentences, 1.13-1.22x for long sentences, 0.95-0.97x for medium ones, and no
#: change for requests of at most 16 sentences, which are one chunk.
SERVING_CHUNK_SIZE = 16

#: In a SavedModel export: which weights it holds (raw or EMA), from which run, in which languages.
EXPORT_WEIGHTS_RECORD = "tf_nmt_weights.json"

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


#: The vocabulary map CTranslate2 reads from a model directory (the converter's name for it).
VMAP_FILE = "vmap.txt"


class CTranslate2ExportError(UserError, ValueError):
    """The run cannot be exported to CTranslate2 (e.g. a GNMT run)."""


def is_ctranslate2_dir(path: Path) -> bool:
    """True for a directory this module exported (CTranslate2 model + tf-nmt metadata)."""
    return (Path(path) / "model.bin").is_file() and (Path(path) / METADATA_FILE).is_file()
