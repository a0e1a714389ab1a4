"""The own corpus's shared SentencePiece vocabulary: learned from a bounded random sample of the
train sentences (unigram or BPE), or the user's own model, checked to have tf-nmt's special ids.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import List, Sequence, Tuple

from tf_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID

from .errors import OwnCorpusError
from .heldout import Reservoir

SPM_FLAGS = f"--pad_id={PAD_ID} --unk_id={UNK_ID} --bos_id={BOS_ID} --eos_id={EOS_ID}"
CHECK_SENTENCES = 256


class VocabSample:
    """A seeded uniform sample of train pairs, ``sentences`` sentences in all (both sides)."""

    def __init__(self, sentences: int, seed: int) -> None:
        self._reservoir = Reservoir((sentences + 1) // 2, random.Random(seed + 1))

    def add(self, src: str, tgt: str) -> None:
        self._reservoir.add((src, tgt))

    def sentences(self) -> List[str]:
        return [side for pair in self._reservoir.items for side in pair]


def learn(sentences: Sequence[str], vocab_size: int, model_type: str, seed: int) -> bytes:
    """A SentencePiece model proto learned from ``sentences`` (deterministic for a seed)."""
    import sentencepiece as spm

    from tf_nmt.data.tokenizer import train_sentencepiece

    spm.set_random_generator_seed(seed)
    return train_sentencepiece(sentences, vocab_size, model_type=model_type,
                               max_sentences=max(len(sentences), 1))


def model_facts(proto: bytes) -> Tuple[int, str]:
    """(pieces, model type) of a SentencePiece model proto."""
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    model = model_pb2.ModelProto()
    model.ParseFromString(proto)
    return len(model.pieces), model_pb2.TrainerSpec.ModelType.Name(
        model.trainer_spec.model_type).lower()


def load_user_model(path: Path) -> bytes:
    """The user's SentencePiece model, refused (one line) unless pad/unk/bos/eos are 0/1/2/3."""
    import sentencepiece as spm

    if not path.is_file():
        raise OwnCorpusError(f"{path}: file not found")
    proto = path.read_bytes()
    try:
        sp = spm.SentencePieceProcessor(model_proto=proto)
    except (RuntimeError, OSError) as err:
        raise OwnCorpusError(f"{path}: not a SentencePiece model ({str(err).strip()})") from None
    ids = (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id())
    if ids != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
        raise OwnCorpusError(
            f"{path}: pad/unk/bos/eos ids are {'/'.join(map(str, ids))}, tf-nmt needs "
            f"{PAD_ID}/{UNK_ID}/{BOS_ID}/{EOS_ID}: train it with spm_train {SPM_FLAGS}")
    return proto


def check_same_ids(proto: bytes, sentences: Sequence[str]) -> None:
    """Python sentencepiece (which encodes the shards) must give the ids tensorflow-text (which
    training, evaluation and serving use) gives; an internal error otherwise."""
    import sentencepiece as spm

    from tf_nmt.data.tokenizer import SubwordTokenizer

    sample = [s for s in sentences[:CHECK_SENTENCES] if s] or ["."]
    python_ids = spm.SentencePieceProcessor(model_proto=proto).encode(list(sample), out_type=int)
    tf_ids = SubwordTokenizer(proto).encode(sample)
    for text, ours, theirs in zip(sample, python_ids, tf_ids):
        if list(ours) != list(theirs):
            raise RuntimeError(f"sentencepiece and tensorflow-text disagree on {text!r}: "
                               f"{ours} != {theirs}")
