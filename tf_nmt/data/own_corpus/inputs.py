"""The user's input files, streamed pair by pair and validated as they are read.

An input is either two line-aligned plain files (source, target) or one ``source<TAB>target``
file; any of them may be gzip-compressed (recognised by its magic bytes, not its name). Every
problem is one :class:`OwnCorpusError` naming ``file:line``: invalid UTF-8, line counts that
differ, a file without text, a TSV row without exactly one TAB. Nothing is held in memory but the
current line, so a corpus of any size can be read.
"""
from __future__ import annotations

import gzip
import itertools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Dict, Iterator, List, Optional, Sequence, Tuple

from .errors import OwnCorpusError

GZIP_MAGIC = b"\x1f\x8b"
Pair = Tuple[str, str]


@dataclass(frozen=True)
class Source:
    """One line-aligned input: ``src`` and ``tgt`` plain files, or a TSV file (``tgt`` None)."""

    src: Path
    tgt: Optional[Path] = None

    @property
    def tsv(self) -> bool:
        return self.tgt is None

    @property
    def files(self) -> List[Path]:
        return [self.src] if self.tgt is None else [self.src, self.tgt]

    def describe(self) -> Dict[str, str]:
        return {"tsv": str(self.src)} if self.tsv else {"src": str(self.src), "tgt": str(self.tgt)}


def sources_from(src: Optional[Sequence[Path]], tgt: Optional[Sequence[Path]],
                 tsv: Optional[Sequence[Path]]) -> List[Source]:
    """Pair ``src[i]`` with ``tgt[i]``, or take each TSV file (the CLI checks the combinations)."""
    if tsv:
        return [Source(Path(p)) for p in tsv]
    return [Source(Path(s), Path(t)) for s, t in zip(src or (), tgt or ())]


def check_exist(sources: Sequence[Source]) -> None:
    for source in sources:
        for path in source.files:
            if not path.is_file():
                raise OwnCorpusError(f"{path}: file not found")


def fingerprint(sources: Sequence[Source]) -> List[Dict[str, object]]:
    """What identifies the inputs without reading them: resolved paths, sizes, mtimes."""
    described = []
    for source in sources:
        for path in source.files:
            stat = path.stat()
            described.append({"path": str(path.resolve()), "size": stat.st_size,
                              "mtime_ns": stat.st_mtime_ns})
    return described


class _Lines:
    """The raw lines of one file (plain or gzip) and how many compressed bytes were read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._raw: BinaryIO = open(path, "rb")
        magic = self._raw.read(2)
        self._raw.seek(0)
        self._handle: BinaryIO = (gzip.GzipFile(fileobj=self._raw, mode="rb")  # type: ignore
                                  if magic == GZIP_MAGIC else self._raw)

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._handle
        except (OSError, EOFError) as err:  # a corrupt or truncated .gz
            raise OwnCorpusError(f"{self.path}: unreadable ({err})") from None

    def position(self) -> int:
        return self._raw.tell()

    def close(self) -> None:
        self._handle.close()
        self._raw.close()


def _decode(raw: bytes, path: Path, number: int) -> str:
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as err:
        raise OwnCorpusError(f"{path}:{number}: invalid UTF-8 ({err.reason} at byte "
                             f"{err.start})") from None


def _empty(path: Path) -> OwnCorpusError:
    return OwnCorpusError(f"{path}: file is empty (no line has text)")


class PairReader:
    """Iterate a :class:`Source`'s pairs as decoded strings (blank lines included, as empty
    sides: cleaning counts them); :meth:`fraction` says how much of its bytes were read."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self._size = max(os.path.getsize(source.src), 1)
        self._first: Optional[_Lines] = None

    def fraction(self) -> float:
        return min(self._first.position() / self._size, 1.0) if self._first else 0.0

    def __iter__(self) -> Iterator[Pair]:
        for path in self.source.files:
            if os.path.getsize(path) == 0:
                raise _empty(path)
        return self._tsv() if self.source.tsv else self._plain()

    def _tsv(self) -> Iterator[Pair]:
        path = self.source.src
        lines = self._first = _Lines(path)
        text = False
        try:
            for number, raw in enumerate(lines, 1):
                line = _decode(raw, path, number)
                if not line.strip():
                    yield "", ""
                    continue
                tabs = line.count("\t")
                if tabs != 1:
                    raise OwnCorpusError(f"{path}:{number}: expected source<TAB>target (exactly "
                                         f"one TAB), found {tabs} TABs")
                text = True
                src, tgt = line.split("\t")
                yield src, tgt
        finally:
            lines.close()
        if not text:
            raise _empty(path)

    def _plain(self) -> Iterator[Pair]:
        src_path, tgt_path = self.source.src, self.source.tgt
        assert tgt_path is not None
        src_lines = self._first = _Lines(src_path)
        tgt_lines = _Lines(tgt_path)
        text = {src_path: False, tgt_path: False}
        number = 0
        try:
            for number, (raw_src, raw_tgt) in enumerate(itertools.zip_longest(src_lines, tgt_lines), 1):
                if raw_src is None or raw_tgt is None:
                    rest = 1 + sum(1 for _ in (src_lines if raw_tgt is None else tgt_lines))
                    n_src = number - 1 + (rest if raw_tgt is None else 0)
                    n_tgt = number - 1 + (rest if raw_src is None else 0)
                    longer = src_path if raw_tgt is None else tgt_path
                    raise OwnCorpusError(f"{longer}:{number}: line counts differ ({src_path}: "
                                         f"{n_src} lines, {tgt_path}: {n_tgt} lines)")
                src = _decode(raw_src, src_path, number)
                tgt = _decode(raw_tgt, tgt_path, number)
                text[src_path] = text[src_path] or bool(src.strip())
                text[tgt_path] = text[tgt_path] or bool(tgt.strip())
                yield src, tgt
        finally:
            src_lines.close()
            tgt_lines.close()
        for path, seen in text.items():
            if not seen:
                raise _empty(path)
