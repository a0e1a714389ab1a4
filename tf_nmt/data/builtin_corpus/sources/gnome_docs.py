"""GNOME user docs: Mallard ``C/*.page`` vs the itstool-merged ``de/*.page``.

The German pages are generated from the C pages, so a block's element path
(local name + index among same-name siblings) identifies the same text in both.
Translator credits, licences and ``its:translate="no"`` subtrees are ignored.
"""
import xml.etree.ElementTree as ET
from pathlib import Path
from collections import Counter
from typing import Iterable, Iterator, List, Optional, Tuple

from ..normalize import clean_text
from ..pairs import Pair
from .keyed_align import pair_blocks

SOURCE = "gnome"
HELP_ROOT = Path("usr/share/help")
BLOCKS = {"title", "subtitle", "desc", "p", "cite", "caption"}
IGNORED = {"credit", "license", "code", "screen", "media", "include"}
_ITS_TRANSLATE = "{http://www.w3.org/2005/11/its}translate"


def _local(tag) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


UNPARSABLE = "unparsable_page"  # the drop reason extract() counts


def page_blocks(path: Path, dropped: Optional[Counter] = None) -> List[Tuple[tuple, str]]:
    """(structural key, cleaned text) for each translatable block of one page; none for a page
    that is not well-formed XML, counted in ``dropped[UNPARSABLE]`` (when given)."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        if dropped is not None:
            dropped[UNPARSABLE] += 1
        return []
    blocks: List[Tuple[tuple, str]] = []

    def walk(node, key: tuple) -> None:
        counts: dict = {}
        for child in node:
            name = _local(child.tag)
            if not name:
                continue
            index = counts.get(name, 0)
            counts[name] = index + 1
            if name in IGNORED or child.get(_ITS_TRANSLATE) == "no":
                continue
            child_key = key + ((name, index),)
            if name in BLOCKS:
                text = clean_text("".join(child.itertext()), markup=False, accelerators=False)
                blocks.append((child_key, text))
            else:
                walk(child, child_key)

    walk(root, ())
    return blocks


def extract(roots: Iterable[Path], dropped: Optional[Counter] = None,
            lang: str = "de") -> Iterator[Pair]:
    """Pairs from every document under ``usr/share/help/C`` with a ``lang`` translation; pages
    that do not parse (either side) are counted in ``dropped`` (reason :data:`UNPARSABLE`)."""
    for root in roots:
        c_dir, de_dir = Path(root) / HELP_ROOT / "C", Path(root) / HELP_ROOT / lang
        for c_page in sorted(c_dir.rglob("*.page")):
            rel = c_page.relative_to(c_dir)
            de_page = de_dir / rel
            if de_page.is_file():
                yield from pair_blocks(page_blocks(c_page, dropped), page_blocks(de_page, dropped),
                                       SOURCE, f"{SOURCE}:{rel.as_posix()}")
