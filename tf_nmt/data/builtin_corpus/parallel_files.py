"""Read users' own parallel corpora with precise ``file:line`` error messages."""
from pathlib import Path
from typing import List, Tuple, Union

from .errors import CorpusError

PathLike = Union[str, Path]


def _read_lines(path: PathLike) -> List[str]:
    """Decoded lines split on ``\\n`` only (a trailing ``\\r`` is dropped)."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"{path}: file not found")
    data = path.read_bytes()
    if not data.strip():
        raise CorpusError(f"{path}: file is empty")
    raw_lines = data.split(b"\n")
    if raw_lines[-1] == b"":
        raw_lines.pop()
    lines = []
    for number, raw in enumerate(raw_lines, 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorpusError(f"{path}:{number}: invalid UTF-8 ({exc.reason} at byte {exc.start})") from exc
        if line.endswith("\r"):
            line = line[:-1]
        if "\x00" in line:
            raise CorpusError(f"{path}:{number}: embedded NUL character")
        lines.append(line)
    return lines


def read_parallel(src_path: PathLike, tgt_path: PathLike) -> List[Tuple[str, str]]:
    """Line-aligned (source, target) pairs from two text files.

    Lines blank on both sides are skipped; everything else that cannot be a clean
    pair raises :class:`CorpusError` naming the file and line.
    """
    src_lines, tgt_lines = _read_lines(src_path), _read_lines(tgt_path)
    if len(src_lines) != len(tgt_lines):
        longer, shorter = (src_path, tgt_path) if len(src_lines) > len(tgt_lines) else (tgt_path, src_path)
        first_unmatched = min(len(src_lines), len(tgt_lines)) + 1
        raise CorpusError(f"{longer}:{first_unmatched}: line counts differ ({src_path}: "
                          f"{len(src_lines)} lines, {tgt_path}: {len(tgt_lines)} lines; no match in {shorter})")
    pairs = []
    for number, (src, tgt) in enumerate(zip(src_lines, tgt_lines), 1):
        for path, line in ((src_path, src), (tgt_path, tgt)):
            if "\t" in line:
                raise CorpusError(f"{path}:{number}: line contains a TAB")
        src_s, tgt_s = src.strip(), tgt.strip()
        if not src_s and not tgt_s:
            continue
        if not src_s or not tgt_s:
            empty = src_path if not src_s else tgt_path
            raise CorpusError(f"{empty}:{number}: empty line where the other side has text")
        pairs.append((src_s, tgt_s))
    return pairs


def read_tsv_parallel(path: PathLike) -> List[Tuple[str, str]]:
    """(en, de) pairs from an ``en<TAB>de`` file; blank lines are skipped."""
    pairs = []
    for number, line in enumerate(_read_lines(path), 1):
        if not line.strip():
            continue
        columns = line.split("\t")
        if len(columns) != 2:
            raise CorpusError(f"{path}:{number}: expected 2 TAB-separated columns, got {len(columns)}")
        en, de = columns[0].strip(), columns[1].strip()
        if not en or not de:
            raise CorpusError(f"{path}:{number}: empty {'source' if not en else 'target'} column")
        pairs.append((en, de))
    return pairs
