"""Per-source oversampling of the train split (``data.oversample``).

A prepared corpus records where each pair came from in ``<split>.meta.tsv`` (first column: the
source, e.g. ``ding`` or ``lo_help``). Repeating the pairs of one source K times in the train
split up-weights that domain, as OpenNMT-tf's dataset weights and Marian's data weighting do;
with the shuffle buffer spanning the whole split the copies are spread over each epoch.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Mapping, Tuple

from tf_nmt.config import ConfigError
from tf_nmt.data.data_dir import corpus_dir, load_split


def check_oversample(oversample: Mapping[str, object]) -> Dict[str, int]:
    """``data.oversample`` as ``{source: K}`` with integer K >= 1, or ConfigError."""
    if not isinstance(oversample, Mapping):
        raise ConfigError(f"data.oversample must map source names to repeat counts, got {oversample!r}")
    checked: Dict[str, int] = {}
    for name, times in oversample.items():
        if isinstance(times, bool) or not isinstance(times, int) or times < 1:
            raise ConfigError(f"data.oversample[{name!r}] = {times!r}: the repeat count must be an "
                              "integer >= 1 (1 leaves the source as it is)")
        checked[str(name)] = times
    return checked


def split_sources(data_dir: Path, split: str) -> List[str]:
    """The source of each pair of ``split``, in file order (from ``<split>.meta.tsv``)."""
    path = corpus_dir(data_dir) / f"{split}.meta.tsv"
    if not path.is_file():
        raise ConfigError(f"{path} is missing: per-source options need a corpus built by "
                          "`tf-nmt prepare-data`, which records each pair's source")
    return [line.split("\t", 1)[0] for line in path.read_text(encoding="utf-8").splitlines()]


def load_train_pairs(data_dir: Path, oversample: Mapping[str, int]) -> List[Tuple[str, str]]:
    """The train split's pairs, each repeated ``oversample[source]`` times in place (a source not
    named keeps one copy). ConfigError when a named source has no train pairs."""
    pairs = load_split(data_dir, "train")
    weights = check_oversample(oversample)
    if not weights:
        return pairs
    sources = split_sources(data_dir, "train")
    if len(sources) != len(pairs):
        raise ConfigError(f"{corpus_dir(data_dir)}: train.meta.tsv has {len(sources)} lines for "
                          f"{len(pairs)} train pairs; rebuild the corpus with `tf-nmt prepare-data`")
    present = sorted(set(sources))
    unknown = sorted(set(weights) - set(present))
    if unknown:
        raise ConfigError(f"data.oversample names {', '.join(map(repr, unknown))}, which the train "
                          f"split of {data_dir} does not have; its sources: {', '.join(present)}")
    out: List[Tuple[str, str]] = []
    for pair, source in zip(pairs, sources):
        out.extend([pair] * weights.get(source, 1))
    return out
