"""LibreOffice help pages: en-US vs de HTML, aligned by paragraph id per file.

Each ``par_id``/``hd_id`` element is one segment; the platform switch spans
(MAC/WIN/UNIX variants, all ``hidden``) are skipped except the ``default`` one.
"""
import re
from pathlib import Path
from typing import Dict, Iterable, Iterator, Optional

from ..normalize import clean_text
from ..pairs import Pair
from ..segment import align_sentences
from .html_blocks import Attrs, collect_blocks

SOURCE = "lo_help"
HELP_ROOT = Path("usr/share/libreoffice/help")
_PARA_ID = re.compile(r"^(?:par|hd)_id")


def _block_key(tag: str, attrs: Attrs, path) -> Optional[tuple]:
    ident = attrs.get("id") or ""
    return (ident,) if _PARA_ID.match(ident) else None


def _skip(tag: str, attrs: Attrs) -> bool:
    return "hidden" in attrs and not (attrs.get("id") or "").startswith("default")


def page_segments(path: Path) -> Dict[str, str]:
    """Paragraph id -> cleaned text (first occurrence wins; embedded copies repeat ids)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    segments: Dict[str, str] = {}
    for (ident,), raw in collect_blocks(text, _block_key, _skip):
        cleaned = clean_text(raw, markup=False, accelerators=False)
        if cleaned and ident not in segments:
            segments[ident] = cleaned
    return segments


def align_help(en_dir: Path, de_dir: Path) -> Iterator[Pair]:
    """Pairs for every page present in both language trees."""
    for en_page in sorted(en_dir.rglob("*.html")):
        rel = en_page.relative_to(en_dir)
        de_page = de_dir / rel
        if not de_page.is_file():
            continue
        de_segments = page_segments(de_page)
        for ident, en in page_segments(en_page).items():
            de = de_segments.get(ident)
            if de:
                group = f"{SOURCE}:{rel.as_posix()}#{ident}"
                for en_s, de_s in align_sentences(en, de):
                    yield Pair(en_s, de_s, SOURCE, group)


def extract(en_roots: Iterable[Path], de_roots: Iterable[Path], lang: str = "de") -> Iterator[Pair]:
    """Pairs from unpacked ``libreoffice-help-en-us`` and ``libreoffice-help-<lang>`` roots."""
    for en_root, de_root in zip(en_roots, de_roots):
        yield from align_help(Path(en_root) / HELP_ROOT / "en-US", Path(de_root) / HELP_ROOT / lang)
