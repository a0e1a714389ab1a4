"""The user's input files, streamed pair by pair and validated as they are read.

An input is either two line-aligned plain files (source, target) or one ``source<TAB>target``
file; any of them may be gzip-, bzip2- or xz-compressed, or zstd-compressed where the
``zstandard`` package is installed (recognised by its magic bytes, not its name). Every problem is
one :class:`OwnCorpusError` naming ``file:line``: invalid UTF-8, compressed data that does not
decompress (the line where reading stopped), line counts that differ, a file without text, a TSV
row without exactly one TAB. Nothing is held in memory but the current line, so a corpus of any
size can be read.
"""
from __future__ import annotations

import bz2
import gzip
import io
import itertools
import lzma
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Dict, Iterator, List, Optional, Sequence, Tuple

from .errors import OwnCorpusError

GZIP_MAGIC = b"\x1f\x8b"
# bzip2: "BZh", the block size 1-9, then a block's or the end's 48-bit magic (pi or sqrt(pi)), so
# a text file that starts with "BZh" is not taken for one.
BZIP2_MAGIC = (b"BZh", b"123456789", (b"\x31\x41\x59\x26\x53\x59", b"\x17\x72\x45\x38\x50\x90"))
XZ_MAGIC = b"\xfd7zXZ\x00"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
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


def compression(head: bytes) -> Optional[str]:
    """The compression ``head`` (a file's first 10 bytes) starts: gzip, bzip2, xz, zstd or None."""
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    name, sizes, blocks = BZIP2_MAGIC
    if head.startswith(name) and head[3:4] and head[3:4] in sizes and head[4:10] in blocks:
        return "bzip2"
    if head.startswith(XZ_MAGIC):
        return "xz"
    return "zstd" if head.startswith(ZSTD_MAGIC) else None


class _ZstdStream(io.RawIOBase):
    """The zstd frames of ``raw``, one after another, decompressed. A file that ends inside a
    frame is an error (zstandard's own stream_reader ends there without one)."""

    def __init__(self, raw: BinaryIO, zstandard: Any) -> None:
        super().__init__()
        self._raw, self._zstd = raw, zstandard
        self._frame: Any = None
        self._out, self._at = b"", 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self._at == len(self._out):
            chunk = self._frame.unused_data if self._frame is not None and self._frame.eof else b""
            chunk = chunk or self._raw.read(1 << 16)
            if self._frame is None or self._frame.eof:
                if not chunk:
                    return 0  # the end, after a whole frame
                self._frame = self._zstd.ZstdDecompressor().decompressobj()
            elif not chunk:
                raise self._zstd.ZstdError("truncated: the file ends inside a frame")
            self._out, self._at = self._frame.decompress(chunk), 0
        n = min(len(buffer), len(self._out) - self._at)
        buffer[:n] = memoryview(self._out)[self._at:self._at + n]
        self._at += n
        return n


def _zstd_reader(path: Path, raw: BinaryIO) -> BinaryIO:
    try:
        import zstandard  # optional: not a dependency of tf-nmt
    except ImportError:
        raise OwnCorpusError(f"{path} is zstd-compressed; install zstandard or decompress it "
                             "(zstd -d)") from None
    return io.BufferedReader(_ZstdStream(raw, zstandard), 1 << 16)  # type: ignore[return-value]


def _errors() -> tuple:
    """What a corrupt or truncated compressed stream raises while it is read."""
    errors: tuple = (OSError, EOFError, zlib.error, lzma.LZMAError)
    try:
        import zstandard
    except ImportError:
        return errors
    return errors + (zstandard.ZstdError,)


class _Lines:
    """The raw lines of one file (plain, gzip, bzip2, xz or zstd) and how many of its bytes were
    read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._raw: BinaryIO = open(path, "rb")
        try:
            self.compression = compression(self._raw.read(10))
            self._raw.seek(0)
            self._handle: BinaryIO = self._open()
        except BaseException:
            self._raw.close()
            raise

    def _open(self) -> BinaryIO:
        if self.compression == "gzip":
            return gzip.GzipFile(fileobj=self._raw, mode="rb")  # type: ignore[return-value]
        if self.compression == "bzip2":
            return bz2.BZ2File(self._raw)  # type: ignore[return-value]
        if self.compression == "xz":
            return lzma.LZMAFile(self._raw)  # type: ignore[return-value]
        if self.compression == "zstd":
            return _zstd_reader(self.path, self._raw)
        return self._raw

    def __iter__(self) -> Iterator[bytes]:
        read = 0
        try:
            for read, line in enumerate(self._handle, 1):
                yield line
        except _errors() as err:  # corrupt or truncated compressed data (a disk error if plain)
            kind = self.compression
            what = f"corrupt {kind} data ({err}); test the file with `{kind} -t`" if kind else \
                f"unreadable ({err})"
            raise OwnCorpusError(f"{self.path}:{read + 1}: {what}") from None

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
        try:
            tgt_lines = _Lines(tgt_path)
        except BaseException:
            src_lines.close()
            raise
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
