"""The Debian Administrator's Handbook: en-US vs de-DE HTML, aligned by structure.

Both languages are rendered from one DocBook source, so a block's element path
(tag + sibling index from the root) identifies the same paragraph in each.
Untranslated paragraphs stay English in de-DE and fall to the en == de filter.
"""
from pathlib import Path
from typing import Iterable, Iterator, List, Optional

from ..normalize import clean_text
from ..pairs import Pair
from .html_blocks import Attrs, collect_blocks
from .keyed_align import pair_blocks

SOURCE = "handbook"
HTML_ROOT = Path("usr/share/doc/debian-handbook/html")
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6", "p", "td", "th", "dt"}


def _block_key(tag: str, attrs: Attrs, path) -> Optional[tuple]:
    if tag in _HEADINGS or (tag == "div" and "para" in (attrs.get("class") or "").split()):
        return path
    return None


def _skip(tag: str, attrs: Attrs) -> bool:
    classes = (attrs.get("class") or "").split()
    return "indexterm" in classes or tag in {"nav", "header", "footer"}


def page_blocks(path: Path) -> List[tuple]:
    """(structural key, cleaned text) for each block of one page."""
    text = path.read_text(encoding="utf-8", errors="replace")
    return [(key, clean_text(raw, markup=False, accelerators=False))
            for key, raw in collect_blocks(text, _block_key, _skip)]


def extract(roots: Iterable[Path], lang_dir: str = "de-DE") -> Iterator[Pair]:
    """Pairs from every unpacked ``debian-handbook`` root: en-US against ``lang_dir`` (e.g. ru-RU)."""
    for root in roots:
        en_dir, de_dir = Path(root) / HTML_ROOT / "en-US", Path(root) / HTML_ROOT / lang_dir
        for en_page in sorted(en_dir.glob("*.html")):
            de_page = de_dir / en_page.name
            if de_page.is_file():
                yield from pair_blocks(page_blocks(en_page), page_blocks(de_page),
                                       SOURCE, f"{SOURCE}:{en_page.name}")
