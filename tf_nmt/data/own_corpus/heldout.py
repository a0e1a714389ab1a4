"""The dev and test splits of an own corpus: carved from train, or read from the user's files.

Carved pairs are a seeded uniform sample (a reservoir filled while the train files are validated,
so no second read and no knowledge of the line count is needed) of the train pairs that pass the
per-pair filters; their line indices are kept out of train. Given files are kept as given but for
pairs with an empty side, so an official test set stays comparable with published scores.
Both are written as cleaned text, ``corpus/{split}.{lang}``.
"""
from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Dict, Iterable, List, Sequence, Set, Tuple

from tf_nmt.utils.io import fsync_directory

from .clean import Counts, new_counts, normalize_pair
from .inputs import PairReader, Source

Item = Tuple[int, str, str]  # (train line index, source, target)


class Reservoir:
    """A uniform random sample of at most ``k`` items of a stream of unknown length."""

    def __init__(self, k: int, rng: random.Random) -> None:
        self.k, self.rng, self.seen, self.items = k, rng, 0, []  # type: ignore[var-annotated]

    def add(self, item) -> None:
        self.seen += 1
        if len(self.items) < self.k:
            self.items.append(item)
        elif self.k:
            j = self.rng.randrange(self.seen)
            if j < self.k:
                self.items[j] = item


def carve(items: Sequence[Item], sizes: Dict[str, int], seed: int
          ) -> Dict[str, Tuple[List[Item], Counts]]:
    """Deal the sampled ``items`` (in a seeded random order) to the splits of ``sizes``
    (e.g. ``{"dev": 2000, "test": 0}``); a pair repeated within a split is dropped and counted."""
    order = sorted(items)
    random.Random(seed).shuffle(order)
    carved, start = {}, 0
    for split, size in sizes.items():
        chosen, seen, counts = [], set(), new_counts()
        for item in order[start:start + size]:
            counts["read"] += 1
            if item[1:] in seen:
                counts["duplicates"] += 1
                continue
            seen.add(item[1:])
            chosen.append(item)
        counts["kept"] = len(chosen)
        carved[split] = (chosen, counts)
        start += size
    return carved


def _write_lines(path: Path, lines: Iterable[str]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as handle:
        handle.writelines(line + "\n" for line in lines)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fsync_directory(path.parent)


def write_split(paths: Tuple[Path, Path], pairs: Sequence[Tuple[str, str]]) -> None:
    """Write ``pairs`` as the two text files ``paths`` (each atomically)."""
    paths[0].parent.mkdir(parents=True, exist_ok=True)
    _write_lines(paths[0], (p[0] for p in pairs))
    _write_lines(paths[1], (p[1] for p in pairs))


def read_given(sources: Sequence[Source]) -> Tuple[List[Tuple[str, str]], Counts]:
    """A given dev or test set, normalised, without the pairs that have an empty side
    (held-out sets are small: they are held in memory)."""
    counts, pairs = new_counts(), []
    for source in sources:
        for src, tgt in PairReader(source):
            counts["read"] += 1
            src, tgt = normalize_pair(src, tgt)
            if not src or not tgt:
                counts["empty"] += 1
                continue
            pairs.append((src, tgt))
    counts["kept"] = len(pairs)
    return pairs, counts


def read_sources(path: Path) -> Set[str]:
    """The source sentences of a written held-out split (what train must not contain)."""
    with open(path, encoding="utf-8", newline="\n") as handle:
        return {line.rstrip("\n") for line in handle}
