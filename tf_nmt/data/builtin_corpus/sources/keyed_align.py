"""Pair two documents' blocks that share a structural key."""
from typing import Iterable, Iterator, List, Tuple

from ..pairs import Pair
from ..segment import align_sentences


def pair_blocks(en_blocks: Iterable[Tuple[tuple, str]], de_blocks: Iterable[Tuple[tuple, str]],
                source: str, group_prefix: str) -> Iterator[Pair]:
    """Yield sentence-aligned pairs for keys present once on both sides.

    Keys seen more than once in a document are ambiguous and skipped.
    """
    def unique(blocks) -> dict:
        seen: dict = {}
        dupes = set()
        for key, text in blocks:
            if key in seen:
                dupes.add(key)
            seen[key] = text
        return {k: v for k, v in seen.items() if k not in dupes}

    en_map, de_map = unique(en_blocks), unique(de_blocks)
    for key, en in en_map.items():
        de = de_map.get(key)
        if not en or not de:
            continue
        group = f"{group_prefix}#{key_to_str(key)}"
        for en_s, de_s in align_sentences(en, de):
            yield Pair(en_s, de_s, source, group)


def key_to_str(key: tuple) -> str:
    """Compact, stable text form of a structural key."""
    parts: List[str] = []
    for step in key:
        parts.append(f"{step[0]}{step[1]}" if isinstance(step, tuple) else str(step))
    return "/".join(parts)
