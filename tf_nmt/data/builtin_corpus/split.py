"""Deterministic dev/test selection by dictionary entry, plus leak removal from train.

Held-out pairs come only from ``eval_source`` (the Ding example sentences).
Whole groups (entries) are ranked by a seeded hash and taken in that order until
the requested sizes are reached, so every sentence of an entry lands in one split.
"""
import hashlib
from collections import OrderedDict
from typing import Dict, Iterable, List, Set

from .normalize import match_key
from .pairs import Pair

SPLITS = ("train", "dev", "test")


def group_rank(group: str, seed: int) -> int:
    """Stable pseudo-random rank of a group for a seed."""
    return int.from_bytes(hashlib.sha256(f"{seed}\x00{group}".encode("utf-8")).digest()[:8], "big")


def eval_eligible(pair: Pair) -> bool:
    """Held-out sentences must be plain: no ``a/b`` slash alternatives or ellipses."""
    text = pair.en + pair.de
    return "/" not in text and "…" not in text and "..." not in text


def _sides(pairs: Iterable[Pair]) -> Set[str]:
    keys: Set[str] = set()
    for pair in pairs:
        keys.add(match_key(pair.en))
        keys.add(match_key(pair.de))
    return keys


def _shares_side(pair: Pair, keys: Set[str]) -> bool:
    return match_key(pair.en) in keys or match_key(pair.de) in keys


def split_pairs(pairs: List[Pair], dev_size: int = 500, test_size: int = 1000, seed: int = 1234,
                eval_source: str = "ding") -> Dict[str, object]:
    """Return ``{"train": [...], "dev": [...], "test": [...], "removed": {...}}``.

    ``removed`` counts pairs dropped because they were ineligible for a held-out
    split or shared a (lower-cased) side with a later-priority split.
    """
    groups: "OrderedDict[str, List[Pair]]" = OrderedDict()
    for pair in pairs:
        if pair.source == eval_source:
            groups.setdefault(pair.group, []).append(pair)
    held: Dict[str, List[Pair]] = {"test": [], "dev": []}
    held_groups: Set[str] = set()
    ineligible = 0
    targets = [("test", test_size), ("dev", dev_size)]
    ranked = sorted(groups, key=lambda g: (group_rank(g, seed), g))
    for group in ranked:
        while targets and len(held[targets[0][0]]) >= targets[0][1]:
            targets.pop(0)
        if not targets:
            break
        good = [p for p in groups[group] if eval_eligible(p)]
        if not good:
            continue
        held[targets[0][0]].extend(good)
        ineligible += len(groups[group]) - len(good)
        held_groups.add(group)
    test_keys = _sides(held["test"])
    dev = [p for p in held["dev"] if not _shares_side(p, test_keys)]
    held_keys = test_keys | _sides(dev)
    rest = [p for p in pairs if not (p.source == eval_source and p.group in held_groups)]
    train = [p for p in rest if not _shares_side(p, held_keys)]
    return {"train": train, "dev": dev, "test": held["test"],
            "removed": {"eval_ineligible": ineligible,
                        "dev_overlapping_test": len(held["dev"]) - len(dev),
                        "train_overlapping_eval": len(rest) - len(train)}}
