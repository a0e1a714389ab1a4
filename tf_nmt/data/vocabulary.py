"""Where the shared vocabulary lives for a prepared corpus, and how it is built once."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Tuple

from tf_nmt.data.corpus import read_parallel
from tf_nmt.data.tokenizer import SubwordTokenizer, train_sentencepiece
from tf_nmt.utils.io import write_bytes_atomic

SPLITS = ("train", "dev", "test")


def corpus_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "corpus"


def vocab_path(data_dir: Path, vocab_size: int) -> Path:
    return Path(data_dir) / "vocab" / f"spm-{vocab_size}.model"


def load_split(data_dir: Path, split: str) -> List[Tuple[str, str]]:
    """(English, German) pairs of a prepared split, validated line by line."""
    base = corpus_dir(data_dir)
    src, tgt = base / f"{split}.en", base / f"{split}.de"
    if not src.is_file() or not tgt.is_file():
        raise FileNotFoundError(f"no {split} split under {base}: run `tf-nmt prepare-data "
                                f"--data-dir {data_dir}` first")
    return read_parallel(src, tgt)


def ensure_vocab(data_dir: Path, vocab_size: int, log: Callable[[str], None] = print
                 ) -> SubwordTokenizer:
    """Load the shared en/de vocabulary of ``data_dir``, learning it from the train split once."""
    path = vocab_path(data_dir, vocab_size)
    if path.is_file():
        return SubwordTokenizer.load(path)
    pairs = load_split(data_dir, "train")
    log(f"learning a shared {vocab_size}-piece SentencePiece vocabulary from {len(pairs)} pairs")
    proto = train_sentencepiece([s for pair in pairs for s in pair], vocab_size)
    write_bytes_atomic(path, proto)
    return SubwordTokenizer(proto)
