"""What a prepared data directory holds and how it is read: its split text files, its
vocabulary (shared, or an own corpus's separate source and target ones), and the built-in
corpus's shared vocabulary, learned once from its train split (:func:`ensure_vocab`)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Optional, Tuple

from tf_nmt.config import ConfigError
from tf_nmt.data.builtin_corpus import read_parallel
from tf_nmt.data.prepared import DataError, PreparedData, read_prepared
from tf_nmt.data.tokenizer import (SOURCE_TOKENIZER, SubwordTokenizer, Tokenizers,
                                   TokenizerPair, train_sentencepiece)
from tf_nmt.utils.io import write_bytes_atomic

SPLITS = ("train", "dev", "test")


def corpus_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "corpus"


def vocab_path(data_dir: Path, vocab_size: int) -> Path:
    return Path(data_dir) / "vocab" / f"spm-{vocab_size}.model"


def load_split(data_dir: Path, split: str) -> List[Tuple[str, str]]:
    """(source, target) pairs of a prepared split (the data dir's language pair, see
    :func:`tf_nmt.data.prepared.read_prepared`), validated line by line."""
    prepared = read_prepared(data_dir)
    src, tgt = prepared.split_files(split)
    if not src.is_file() or not tgt.is_file():
        if not prepared.own:
            raise FileNotFoundError(f"no {split} split under {corpus_dir(data_dir)}: run "
                                    f"`tf-nmt prepare-data --data-dir {data_dir}` first")
        if split == "train":
            raise DataError(f"{data_dir}: an own corpus keeps its train pairs as shards "
                            "(streamed by tf-nmt train), not as text")
        raise DataError(f"{data_dir} has no {split} split ({src.name}/{tgt.name} missing: "
                        f"prepare-data was given no --{split}-* files and no --{split}-size); "
                        "use another split (e.g. dev), or re-run prepare-data with one")
    return read_parallel(src, tgt)


def prepared_vocab(prepared: PreparedData, vocab_size: Optional[int] = None) -> Tokenizers:
    """An own corpus's vocabulary, as its manifest records it: the shared tokenizer, or the
    :class:`TokenizerPair` of a corpus prepared with separate ones. ``vocab_size``: the size the
    configuration asks for (None: not given, the manifest's; the target's when separate);
    another size is a ConfigError naming both, a missing or changed model file a
    :class:`DataError`."""
    if vocab_size is not None and vocab_size != prepared.vocab_size:
        raise ConfigError(f"data.vocab_size={vocab_size}, but the corpus in {prepared.root} was "
                          f"prepared with a {prepared.vocab_size}-piece "
                          f"{'' if prepared.shared_vocab else 'target '}vocabulary: unset "
                          f"data.vocab_size (or set it to {prepared.vocab_size}), or re-run "
                          "prepare-data with --vocab-size")
    vocab = prepared.manifest.get("vocab", {})
    target = _load_checked(prepared.root / vocab.get(
        "path", f"vocab/spm-{prepared.vocab_size}.model"), prepared.vocab_fingerprint)
    if prepared.shared_vocab:
        return target
    source = _load_checked(prepared.root / vocab.get("src", {}).get("path", ""),
                           prepared.source_vocab_fingerprint, SOURCE_TOKENIZER)
    return TokenizerPair(source, target)


def _load_checked(path: Path, fingerprint: Optional[str],
                  name: str = "subword_tokenizer") -> SubwordTokenizer:
    if not path.is_file():
        raise DataError(f"{path}: vocabulary missing (the manifest names it); re-run "
                        "`tf-nmt prepare-data ... --force`")
    tokenizer = SubwordTokenizer.load(path, name)
    if fingerprint and tokenizer.fingerprint != fingerprint:
        raise DataError(f"{path}: vocabulary {tokenizer.fingerprint}, but the shards were encoded "
                        f"with {fingerprint}; re-run `tf-nmt prepare-data ... --force`")
    return tokenizer


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
