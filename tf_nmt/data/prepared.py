"""A prepared data directory: what ``tf-nmt prepare-data`` leaves for training, evaluation and
export, read through one description (:class:`PreparedData`).

Two kinds exist:

- the built-in Debian en-de corpus (``corpus/stats.json``): text splits held in memory by the
  trainer, as the quickstart has always used them;
- a user's own corpus (``corpus/manifest.json``): any language pair, cleaned text for dev/test,
  a SentencePiece vocabulary, and the training pairs as sharded files of token ids that training
  streams (:mod:`tf_nmt.data.streaming`), so memory stays bounded whatever the corpus size.

Layout of an own corpus::

    DATA_DIR/corpus/manifest.json            this module's MANIFEST_FORMAT
    DATA_DIR/corpus/{dev,test}.{src,tgt}     cleaned text (test only when given or carved)
    DATA_DIR/vocab/spm-<size>.model          the shared vocabulary, or (--separate-vocab)
    DATA_DIR/vocab/spm-{src,tgt}-<size>.model    the source's and the target's
    DATA_DIR/shards/train-00000-of-00064.tfrecord ...

A shard is a TFRecord file; each record is one pair, the raw little-endian int32 array
``[n_src, src ids..., tgt ids...]`` (no bos/eos), see :func:`encode_record`; with separate
vocabularies the source ids are the source model's, the target ids the target model's.

The manifest's ``vocab`` keeps ``path``/``size``/``fingerprint`` of the target (= shared)
model; ``shared: false`` adds ``src`` and ``tgt`` entries (each ``path``, ``size``,
``fingerprint``, ``type``, ``origin``); a manifest without ``shared`` is a shared one.
"""
from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tf_nmt.errors import UserError

MANIFEST_FORMAT = "tf-nmt/own-corpus/1"
BUILTIN_NAME = "debian-en-de"
BUILTIN_LANGUAGES = ("en", "de")
SPLITS = ("train", "dev", "test")


class DataError(UserError, ValueError):
    """A prepared data directory that cannot be used as asked (missing or truncated shard,
    mismatched languages or vocabulary, more ranks than training pairs)."""


@dataclass(frozen=True)
class ShardInfo:
    """One shard file as written: its name under ``shards/``, pairs and exact size in bytes."""

    name: str
    pairs: int
    bytes: int
    src_tokens: int = 0
    tgt_tokens: int = 0


@dataclass
class PreparedData:
    """What a data directory holds (see the module docstring)."""

    root: Path
    name: str                      # BUILTIN_NAME, or "own" for a user's corpus
    src_lang: str
    tgt_lang: str
    vocab_size: Optional[int] = None          # own corpus: fixed at prepare time (the target's)
    vocab_fingerprint: Optional[str] = None
    source_vocab_size: Optional[int] = None   # separate vocabularies only (None: shared)
    source_vocab_fingerprint: Optional[str] = None
    splits: Dict[str, Dict[str, Any]] = field(default_factory=dict)   # split -> {"pairs", "origin"}
    shards: List[ShardInfo] = field(default_factory=list)
    manifest: Dict[str, Any] = field(default_factory=dict)

    @property
    def own(self) -> bool:
        return self.name != BUILTIN_NAME

    @property
    def shared_vocab(self) -> bool:
        """True unless the corpus was prepared with separate source/target vocabularies."""
        return self.source_vocab_fingerprint is None

    @property
    def languages(self) -> Tuple[str, str]:
        return self.src_lang, self.tgt_lang

    def split_files(self, split: str) -> Tuple[Path, Path]:
        """(source, target) text files of ``split``."""
        base = self.root / "corpus"
        return base / f"{split}.{self.src_lang}", base / f"{split}.{self.tgt_lang}"

    def has_split(self, split: str) -> bool:
        return all(p.is_file() for p in self.split_files(split))

    def shard_paths(self) -> List[Path]:
        """The train shards, each checked present and of its recorded size (a truncated or
        missing shard is one :class:`DataError` line naming it)."""
        paths = []
        for info in self.shards:
            path = self.root / "shards" / info.name
            if not path.is_file():
                raise DataError(f"{path}: shard missing (the manifest lists {len(self.shards)} "
                                "shards); re-run the same `tf-nmt prepare-data` command")
            size = path.stat().st_size
            if size != info.bytes:
                raise DataError(f"{path}: shard truncated or changed ({size} bytes, the manifest "
                                f"says {info.bytes}); re-run `tf-nmt prepare-data ... --force`")
            paths.append(path)
        return paths

    def rank_blocks(self, world_size: int, rank: int, block_pairs: int) -> List["Block"]:
        """The records rank ``rank`` of ``world_size`` trains on, as :class:`Block` s of at most
        ``block_pairs`` records: its :func:`share_bounds` of the corpus's pairs taken in shard
        order, whatever the number of shards (a shard may be split between ranks, a rank may
        read several). Every pair belongs to exactly one rank; shares differ by at most one."""
        if block_pairs < 1:
            raise ValueError(f"block_pairs must be >= 1, got {block_pairs}")
        paths = self.shard_paths()
        total = sum(info.pairs for info in self.shards)
        if world_size > total:
            raise DataError(f"{self.root}: {world_size} ranks but only {total} training pairs: "
                            "each rank needs a pair of its own; use fewer ranks")
        low, high = share_bounds(total, world_size, rank)
        blocks, offset = [], 0
        for info, path in zip(self.shards, paths):
            first, last = max(low, offset), min(high, offset + info.pairs)
            blocks += [Block(path, start - offset, min(block_pairs, last - start))
                       for start in range(first, last, block_pairs)]
            offset += info.pairs
        return blocks

    @property
    def train_pairs(self) -> int:
        return int(self.splits.get("train", {}).get("pairs", 0))


@dataclass(frozen=True)
class Block:
    """``count`` consecutive records of the shard ``path``, from its ``start``-th (0-based)."""

    path: Path
    start: int
    count: int


def share_bounds(total: int, world_size: int, rank: int) -> Tuple[int, int]:
    """[first, end) of rank ``rank``'s share of ``total`` pairs: consecutive, disjoint, sizes
    differing by at most one, together all ``total``."""
    return total * rank // world_size, total * (rank + 1) // world_size


def vocab_fingerprint(model_proto: bytes) -> str:
    """A SentencePiece model's fingerprint, as manifests, run dirs and exports record it
    (here, without TensorFlow, so the CTranslate2 path can check it too)."""
    return hashlib.sha256(model_proto).hexdigest()[:16]


def manifest_path(data_dir: Path) -> Path:
    return Path(data_dir) / "corpus" / "manifest.json"


def read_prepared(data_dir: Path) -> PreparedData:
    """The description of ``data_dir``: an own corpus when it has a manifest, else the built-in
    en-de corpus (whose files may not exist yet: prepare-data builds them)."""
    data_dir = Path(data_dir)
    path = manifest_path(data_dir)
    if not path.is_file():
        return PreparedData(data_dir, BUILTIN_NAME, *BUILTIN_LANGUAGES)
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: unreadable manifest ({e}); re-run prepare-data --force") from None
    if manifest.get("format") != MANIFEST_FORMAT:
        raise DataError(f"{path}: format {manifest.get('format')!r}, this tf-nmt reads "
                        f"{MANIFEST_FORMAT!r}; re-run prepare-data --force")
    vocab = manifest.get("vocab", {})
    source = {} if vocab.get("shared", True) else vocab.get("src", {})
    # the pieces the model has (a manifest written before issue 55 records the size asked as
    # ``size``, which SentencePiece may not have reached)
    return PreparedData(
        root=data_dir, name=manifest.get("name", "own"), src_lang=manifest["src_lang"],
        tgt_lang=manifest["tgt_lang"], vocab_size=vocab.get("pieces", vocab.get("size")),
        vocab_fingerprint=vocab.get("fingerprint"),
        source_vocab_size=source.get("pieces", source.get("size")),
        source_vocab_fingerprint=source.get("fingerprint"), splits=manifest.get("splits", {}),
        shards=[ShardInfo(**s) for s in manifest.get("shards", {}).get("files", [])],
        manifest=manifest)


def encode_record(src: Sequence[int], tgt: Sequence[int]) -> bytes:
    """One pair as a shard record: little-endian int32 ``[len(src), *src, *tgt]``."""
    return struct.pack(f"<{1 + len(src) + len(tgt)}i", len(src), *src, *tgt)


def decode_record(record: bytes) -> Tuple[List[int], List[int]]:
    """The inverse of :func:`encode_record` (Python side; training decodes in-graph)."""
    values = struct.unpack(f"<{len(record) // 4}i", record)
    n = values[0]
    return list(values[1:1 + n]), list(values[1 + n:])
