"""Which pairs of a user's corpus are kept, with a count for every reason a pair is dropped.

Both sides are normalised first (NFC, control characters out, whitespace runs to one space: the
built-in corpus's :func:`~tf_nmt.data.builtin_corpus.normalize.normalize_space`), so a kept side never
holds a TAB or a newline. Then, in this order, a pair is dropped as

- ``empty``: a side has no text;
- ``too_long``: a side has more than ``max_chars`` characters;
- ``ratio``: the longer side has more than ``max_ratio`` times the characters of the shorter
  (characters, not UTF-8 bytes: a Cyrillic, Greek or Devanagari letter takes 2-3 bytes, so a
  byte ratio would drop good pairs of those scripts against English);
- ``duplicates``: the same (source, target) pair was kept before;
- ``overlap``: (train only) its source is the source of a dev or test pair, so the held-out
  sets measure translation of unseen sentences.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Tuple

from tf_nmt.data.builtin_corpus.normalize import normalize_space

REASONS = ("empty", "too_long", "ratio", "duplicates", "overlap")
Counts = Dict[str, int]


def new_counts() -> Counts:
    """``read``, one count per reason, ``kept``."""
    return {"read": 0, **{reason: 0 for reason in REASONS}, "kept": 0}


def add_counts(total: Counts, more: Mapping[str, int]) -> Counts:
    for key, value in more.items():
        total[key] = total.get(key, 0) + value
    return total


def normalize_pair(src: str, tgt: str) -> Tuple[str, str]:
    return normalize_space(src), normalize_space(tgt)


@dataclass(frozen=True)
class Filters:
    """The per-pair filters (duplicates and overlap need the other pairs: see
    :mod:`.encode_worker` and :mod:`.heldout`)."""

    max_chars: int = 1000
    max_ratio: float = 3.0

    def reject(self, src: str, tgt: str) -> Optional[str]:
        """``empty``, ``too_long``, ``ratio``, or None for a normalised pair that passes."""
        if not src or not tgt:
            return "empty"
        if len(src) > self.max_chars or len(tgt) > self.max_chars:
            return "too_long"
        short, long_ = sorted((len(src), len(tgt)))
        if long_ > self.max_ratio * short:
            return "ratio"
        return None
