"""Example sentences from the Ding German-English dictionary (``trans-de-en``).

A line is ``German :: English``; both sides are ``|``-separated lists aligned by
position, each item may hold ``;``-separated alternatives. Only items whose both
sides are full sentences are kept; each dictionary line is one split group.
"""
import re
from pathlib import Path
from typing import Iterable, Iterator, List, Tuple

from ..normalize import normalize_space
from ..pairs import Pair

SOURCE = "ding"
DICT_PATH = Path("usr/share/trans/de-en")

_ANNOTATION = re.compile(r"\s*(?:\{[^{}]*\}|\[[^\[\]]*\]|<[^<>]*>)")
_TRAILING_PAREN = re.compile(r"([.!?][\"'”’»]?)\s*\([^()]*\)\s*$")
_PAREN = re.compile(r"\(([^()]*)\)")
_SENTENCE_END = re.compile(r"[.!?][\"'”’»«]?$")
_HAS_END = re.compile(r"[.!?]")
_PLACEHOLDERS = {"sth.", "sb.", "sb.’s", "sb.'s", "etw.", "jdm.", "jdn.", "jds.", "jd."}
MIN_WORDS = 3


def strip_annotations(text: str) -> str:
    """Drop ``{f}``, ``[Br.]``, ``<variant>`` and glosses after the final punctuation."""
    text = _ANNOTATION.sub("", text)
    text = _TRAILING_PAREN.sub(r"\1", text.strip())
    text = _PAREN.sub(r"\1", text)
    return normalize_space(text)


def is_sentence(text: str) -> bool:
    """Capitalised, >= MIN_WORDS words, ends in . ? or !, no ``sth.``/``jdm.`` slots."""
    words = text.split()
    if len(words) < MIN_WORDS or text.endswith(("...", "…")):
        return False
    first = next((c for c in text if c.isalpha()), "")
    if not first.isupper() or not _SENTENCE_END.search(text):
        return False
    return not any(w.strip("(),") in _PLACEHOLDERS for w in words)


def _alternatives(item: str) -> List[str]:
    """``;``-separated alternatives if each ends like a sentence, else the item as one candidate."""
    if not _HAS_END.search(item):
        return []
    parts = [strip_annotations(p) for p in item.split(";")]
    parts = [p for p in parts if p]
    if len(parts) > 1 and all(_SENTENCE_END.search(p) for p in parts):
        return parts
    return [strip_annotations(item)]


def _pair_alternatives(de: List[str], en: List[str]) -> List[Tuple[str, str]]:
    if not de or not en:
        return []
    if len(de) == len(en):
        pairs = list(zip(en, de))
    elif len(de) == 1:
        pairs = [(e, de[0]) for e in en]
    elif len(en) == 1:
        pairs = [(en[0], d) for d in de]
    else:
        return []
    return [(e, d) for e, d in pairs if is_sentence(e) and is_sentence(d)]


def parse_line(line: str) -> List[Tuple[str, str]]:
    """(en, de) sentence pairs from one dictionary line; [] for comments and mismatches."""
    if line.startswith("#") or " :: " not in line:
        return []
    de_side, en_side = line.rstrip("\n").split(" :: ", 1)
    de_items, en_items = de_side.split(" | "), en_side.split(" | ")
    if len(de_items) != len(en_items):
        return []
    pairs = []
    for de_item, en_item in zip(de_items, en_items):
        pairs.extend(_pair_alternatives(_alternatives(de_item), _alternatives(en_item)))
    return pairs


def read_dictionary(path: Path) -> Iterator[Pair]:
    """All sentence pairs of a Ding file; group = ``ding:<line number>``."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            for en, de in parse_line(line):
                yield Pair(en, de, SOURCE, f"ding:{number}")


def extract(roots: Iterable[Path]) -> Iterator[Pair]:
    """Pairs from every unpacked ``trans-de-en`` root."""
    for root in roots:
        yield from read_dictionary(Path(root) / DICT_PATH)
