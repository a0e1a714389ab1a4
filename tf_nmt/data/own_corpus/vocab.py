"""The own corpus's SentencePiece vocabulary: one shared by both sides, or (``--separate-vocab``)
a source and a target model; learned from a bounded random sample of the train sentences
(unigram or BPE; a separate model from its own side's sentences only), or the user's own
model(s), checked to have tf-nmt's special ids.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from tf_nmt.data.prepared import vocab_fingerprint
from tf_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from tf_nmt.utils.io import write_bytes_atomic

from .errors import OwnCorpusError
from .heldout import Reservoir

SPM_FLAGS = f"--pad_id={PAD_ID} --unk_id={UNK_ID} --bos_id={BOS_ID} --eos_id={EOS_ID}"
CHECK_SENTENCES = 256
SAMPLE_FILES = ("vocab_sample.src.txt", "vocab_sample.tgt.txt")  # separate: one per side
SIDES = (("source", "src"), ("target", "tgt"))


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
    # every sentence is used; SentencePiece refuses a cap of 1..100 (a separate vocabulary of a
    # tiny corpus learns from fewer), and a cap above the count changes nothing
    return train_sentencepiece(sentences, vocab_size, model_type=model_type,
                               max_sentences=max(len(sentences), 101))


def learned_size(pieces: int, asked: int, allow_smaller: bool, what: str, flag: str,
                 log: Callable[[str], None]) -> int:
    """The size a learned vocabulary is recorded and named by: its ``pieces``. SentencePiece
    (``hard_vocab_limit=False``) returns fewer than ``asked`` when the sample supports no more,
    and then ``pieces`` is the largest size that works: refused (one line naming it) unless
    ``allow_smaller``, when one line says so."""
    if pieces >= asked:
        return pieces
    if not allow_smaller:
        raise OwnCorpusError(
            f"vocab: the training sample gives a {what}vocabulary of at most {pieces:,} pieces, "
            f"fewer than the {asked:,} that {flag} asks: re-run with {flag} {pieces}, or add "
            f"--allow-smaller-vocab to keep {pieces:,} pieces (the passes done are kept)")
    log(f"vocab: learned {pieces:,} {what}pieces, fewer than the {asked:,} asked: the sample "
        f"supports no more (--allow-smaller-vocab); the vocabulary is {pieces:,} pieces")
    return pieces


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


def write_sample(path: Path, sentences: Sequence[str]) -> None:
    write_bytes_atomic(path, "".join(s + "\n" for s in sentences).encode("utf-8"))


def read_sample(path: Path) -> List[str]:
    """The sentences :func:`write_sample` wrote (split on newlines only, so each side's file
    keeps one line per sampled sentence)."""
    text = path.read_text(encoding="utf-8")
    return text.split("\n")[:-1] if text else []


def separate_models(work: Path, out: Path, sizes: Dict[str, int],
                    users: Dict[str, Optional[Path]], model_type: str, seed: int,
                    dev_files: Sequence[Path], log: Callable[[str], None],
                    allow_smaller: bool = False, flags: Optional[Dict[str, str]] = None
                    ) -> Dict[str, Any]:
    """Separate vocabularies: per side (``source``, ``target``) the user's model or one learned
    from that side's sample (``work/SAMPLE_FILES``) with ``sizes[side]`` pieces (fewer: see
    :func:`learned_size`; ``flags[side]`` names the flag that asked), written as
    ``out/vocab/spm-{src,tgt}-<pieces>.model``; the manifest's ``vocab`` entry (the target's
    ``path``/``size``/``fingerprint`` at the top, both sides under ``src`` and ``tgt``; a learned
    side also records the ``requested`` size)."""
    entries: Dict[str, Dict[str, Any]] = {}
    samples = 0
    for index, (side, short) in enumerate(SIDES):
        sentences = read_sample(work / SAMPLE_FILES[index])
        samples += len(sentences)
        user = users[side]
        if user is not None:
            proto, origin = load_user_model(user), f"user model {user.resolve()}"
        else:
            log(f"vocab: learning a {model_type} {side} SentencePiece model of up to "
                f"{sizes[side]:,} pieces from {len(sentences):,} sampled {side} sentences")
            proto = learn(sentences, sizes[side], model_type, seed)
            origin = f"learned from the train sample's {side} sentences"
        pieces, kind = model_facts(proto)
        size = pieces if user is not None else learned_size(
            pieces, sizes[side], allow_smaller, f"{side} ",
            (flags or {}).get(side, "--vocab-size"), log)
        dev = Path(dev_files[index])
        check_same_ids(proto, sentences or (dev.read_text(encoding="utf-8").splitlines()
                                            if dev.is_file() else []))
        path = f"vocab/spm-{short}-{size}.model"
        write_bytes_atomic(out / path, proto)
        entries[short] = {"path": path, "size": size, "pieces": pieces, "type": kind,
                          "origin": origin, "fingerprint": vocab_fingerprint(proto),
                          **({} if user is not None else {"requested": sizes[side]})}
    target = entries["tgt"]
    return {"shared": False, **{k: target[k] for k in ("path", "size", "pieces", "type",
                                                       "fingerprint")},
            "sample_sentences": samples, **entries}
