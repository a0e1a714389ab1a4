"""Shared en/de subword vocabulary: learned with SentencePiece, applied in-graph by tensorflow-text.

One vocabulary serves both languages so the Transformer can tie its embeddings. The model proto
is stored as bytes next to the corpus and is embedded in the exported SavedModel, so serving
needs nothing but TensorFlow and tensorflow-text. Ids are fixed: pad=0, unk=1, bos=2, eos=3.
"""
from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Union

import tensorflow_text as tf_text

from tf_nmt.data.prepared import vocab_fingerprint

from tf_nmt.compat import tf
from tf_nmt.utils.io import write_bytes_atomic

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


def train_sentencepiece(texts: Iterable[str], vocab_size: int, model_type: str = "unigram",
                        character_coverage: float = 0.9995, max_sentences: int = 400_000,
                        seed_sentencepiece_size: int = 200_000) -> bytes:
    """Learn a SentencePiece model from ``texts`` and return its serialized proto.

    Whitespace is kept verbatim (``--remove_extra_whitespaces=false`` and no NFKC) so that
    detokenize(tokenize(x)) == x for any text the corpus builder produces.
    """
    import sentencepiece as spm

    sentences = [t for t in texts if t.strip()]
    if not sentences:
        raise ValueError("cannot learn a vocabulary from an empty corpus")
    if vocab_size < 300:
        raise ValueError(f"vocab_size must be >= 300 (256 byte-fallback pieces + specials), got {vocab_size}")
    proto = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=proto,
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        input_sentence_size=max_sentences,
        shuffle_input_sentence=True,
        seed_sentencepiece_size=seed_sentencepiece_size,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
        byte_fallback=True,
        hard_vocab_limit=False,
        num_threads=os.cpu_count() or 1,
        minloglevel=2,
    )
    return proto.getvalue()


SOURCE_TOKENIZER = "source_tokenizer"  # the name of a separate source vocabulary's tokenizer


class SubwordTokenizer(tf.Module):
    """In-graph tokenizer/detokenizer around a SentencePiece model proto (tensorflow-text).

    A ``name`` other than the default also names the SentencePiece resource's op: a SavedModel
    holding two tokenizers (separate vocabularies, the source one named
    :data:`SOURCE_TOKENIZER`) needs them to differ, or the loaded ones share one model."""

    def __init__(self, model_proto: bytes, name: str = "subword_tokenizer") -> None:
        super().__init__(name=name)
        self.model_proto = model_proto
        self._sp = tf_text.SentencepieceTokenizer(
            model=model_proto, add_bos=False, add_eos=False,
            name=None if name == "subword_tokenizer" else name)
        self.vocab_size = int(self._sp.vocab_size().numpy())

    @property
    def fingerprint(self) -> str:
        """Stable hash of the vocabulary; checkpoints record it so a resume can't mix vocabularies."""
        return vocab_fingerprint(self.model_proto)

    @classmethod
    def load(cls, path: Union[str, Path], name: str = "subword_tokenizer") -> "SubwordTokenizer":
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"vocabulary model not found: {path} (run `tf-nmt prepare-data`)")
        return cls(path.read_bytes(), name)

    def save(self, path: Union[str, Path]) -> None:
        """Write the model proto atomically."""
        write_bytes_atomic(Path(path), self.model_proto)

    def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Strings [B] -> ragged int32 ids [B, (n)] (no bos/eos)."""
        return tf.cast(self._sp.tokenize(texts), tf.int32)

    def detokenize(self, ids) -> tf.Tensor:
        """Ids [B, n] (dense, padded with pad/eos, or ragged) -> strings [B]. Stops at the first eos."""
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.convert_to_tensor(ids, tf.int32)
            keep = tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=1) == 0
            keep = tf.logical_and(keep, tf.not_equal(ids, PAD_ID))
            ids = tf.ragged.boolean_mask(ids, keep)
        return self._sp.detokenize(ids)

    def encode(self, texts: Sequence[str]) -> List[List[int]]:
        return self.tokenize(tf.constant(list(texts))).to_list()

    def decode(self, ids: Sequence[Sequence[int]]) -> List[str]:
        if len(ids) == 0:
            return []
        dense = tf.ragged.constant([list(x) for x in ids], dtype=tf.int32).to_tensor()
        return [s.decode("utf-8") for s in self.detokenize(dense).numpy()]


@dataclass(frozen=True, eq=False)
class TokenizerPair:
    """The (source, target) tokenizers of a corpus or a run; ``shared`` when one model serves
    both sides (the default, and every run before separate vocabularies existed).

    Where translation code took one tokenizer it takes either this or a
    :class:`SubwordTokenizer` (:meth:`of`): ``tokenize``/``encode`` read source text with the
    source model, ``detokenize``/``decode`` write target text with the target model."""

    source: SubwordTokenizer
    target: SubwordTokenizer

    def __post_init__(self) -> None:
        if not self.shared and self.source.name == self.target.name:
            raise ValueError(f"separate tokenizers need distinct names (both {self.source.name!r}; "
                             f"name the source one {SOURCE_TOKENIZER!r}): an export holding both "
                             "would load them as one")

    @classmethod
    def of(cls, value: Union[SubwordTokenizer, "TokenizerPair"]) -> "TokenizerPair":
        """``value`` itself, or a lone tokenizer as a shared pair."""
        return value if isinstance(value, TokenizerPair) else cls(value, value)

    @property
    def shared(self) -> bool:
        return self.source is self.target

    @property
    def source_vocab_size(self) -> Optional[int]:
        """The source vocabulary's size, None when shared (what the models' hparam expects)."""
        return None if self.shared else self.source.vocab_size

    @property
    def source_fingerprint(self) -> Optional[str]:
        """The source vocabulary's fingerprint, None when shared."""
        return None if self.shared else self.source.fingerprint

    def as_tokenizer(self) -> Union[SubwordTokenizer, "TokenizerPair"]:
        """The shared tokenizer itself, else this pair (what translation code is handed)."""
        return self.target if self.shared else self

    def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        return self.source.tokenize(texts)

    def encode(self, texts: Sequence[str]) -> List[List[int]]:
        return self.source.encode(texts)

    def detokenize(self, ids) -> tf.Tensor:
        return self.target.detokenize(ids)

    def decode(self, ids: Sequence[Sequence[int]]) -> List[str]:
        return self.target.decode(ids)


Tokenizers = Union[SubwordTokenizer, TokenizerPair]
