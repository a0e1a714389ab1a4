"""Build the en-de corpus end to end: debs -> unpack -> extract -> clean -> split -> files.

The output directory is written atomically and cached by ``stats.json``: a second
call with the same builder version and parameters returns without unpacking.
"""
import json
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional

from tf_nmt.utils.io import replace_directory_atomically, staging_directory

from . import debian
from .errors import CorpusError
from .normalize import normalize_space, reject_reason
from .pairs import Pair
from .sources.registry import SOURCES, SourceSpec, all_packages
from .split import SPLITS, split_pairs

BUILDER_VERSION = "1.0"
Log = Callable[[str], None]


def _params(dev_size: int, test_size: int, seed: int) -> dict:
    return {"dev_size": dev_size, "test_size": test_size, "seed": seed,
            "sources": [spec.name for spec in SOURCES]}


def output_files(corpus_dir: Path) -> List[Path]:
    """Every file a finished corpus directory must contain."""
    files = [corpus_dir / "stats.json"]
    for split in SPLITS:
        files += [corpus_dir / f"{split}.{ext}" for ext in ("en", "de", "meta.tsv")]
    return files


def load_cached(corpus_dir: Path, params: dict) -> Optional[dict]:
    """The stored stats if the corpus is complete and was built the same way, else None."""
    stats_path = corpus_dir / "stats.json"
    if not stats_path.is_file():
        return None
    try:
        stats = json.loads(stats_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if stats.get("builder_version") != BUILDER_VERSION or stats.get("params") != params:
        return None
    if not all(path.is_file() for path in output_files(corpus_dir)):
        return None
    return stats


def clean_and_dedupe(pairs: Iterable[Pair], filtered: Counter) -> List[Pair]:
    """Normalise both sides, drop unusable pairs (counted by reason) and exact duplicates."""
    kept, seen = [], set()
    for pair in pairs:
        en, de = normalize_space(pair.en), normalize_space(pair.de)
        reason = reject_reason(en, de)
        if reason:
            filtered[reason] += 1
            continue
        if (en, de) in seen:
            filtered["duplicate"] += 1
            continue
        seen.add((en, de))
        kept.append(Pair(en, de, pair.source, " ".join(pair.group.split())))
    return kept


def extract_all(roots: Dict[str, Path], log: Log = print,
                sources: Iterable[SourceSpec] = SOURCES,
                dropped: Optional[Dict[str, Counter]] = None) -> Dict[str, List[Pair]]:
    """Raw pairs per source name. What a source skips as unreadable (e.g. GNOME pages that do not
    parse) is logged on its line and counted by reason into ``dropped[source name]``."""
    raw = {}
    dropped = {} if dropped is None else dropped
    for spec in sources:
        start = time.time()
        dropped[spec.name] = Counter()
        raw[spec.name] = list(spec.extract(roots, dropped[spec.name]))
        skipped = "".join(f", {n} dropped ({reason})" for reason, n in sorted(dropped[spec.name].items()))
        log(f"  {spec.name:<9} {len(raw[spec.name]):>7} raw pairs ({time.time() - start:.1f}s)"
            + skipped)
    return raw


def write_corpus(corpus_dir: Path, splits: Dict[str, List[Pair]], stats: dict) -> None:
    """Write all files into a temp dir next to ``corpus_dir`` and swap it in."""
    corpus_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = staging_directory(corpus_dir)
    try:
        for split in SPLITS:
            pairs = splits[split]
            for ext, column in (("en", 0), ("de", 1)):
                with open(tmp / f"{split}.{ext}", "w", encoding="utf-8", newline="\n") as handle:
                    handle.writelines(p[column] + "\n" for p in pairs)
            with open(tmp / f"{split}.meta.tsv", "w", encoding="utf-8", newline="\n") as handle:
                handle.writelines(f"{p.source}\t{p.group}\n" for p in pairs)
        (tmp / "stats.json").write_text(json.dumps(stats, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        replace_directory_atomically(tmp, corpus_dir, overwrite=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def summary_table(stats: dict) -> str:
    """Pair counts per source (rows) and split (columns) as plain text."""
    header = f"{'source':<10}" + "".join(f"{s:>9}" for s in SPLITS) + f"{'total':>9}"
    rows = [header, "-" * len(header)]
    for source, counts in stats["sources"].items():
        total = sum(counts.get(s, 0) for s in SPLITS)
        rows.append(f"{source:<10}" + "".join(f"{counts.get(s, 0):>9}" for s in SPLITS) + f"{total:>9}")
    rows.append("-" * len(header))
    rows.append(f"{'all':<10}" + "".join(f"{stats['splits'][s]:>9}" for s in SPLITS)
                + f"{sum(stats['splits'].values()):>9}")
    return "\n".join(rows)


def build_stats(splits: Dict[str, List[Pair]], raw: Dict[str, List[Pair]], filtered: Counter,
                removed: dict, params: dict, debs: Dict[str, Path], seconds: float,
                dropped: Optional[Dict[str, Counter]] = None) -> dict:
    """The stats.json payload (``source_dropped``: per source, what it skipped by reason)."""
    sources = {name: {s: 0 for s in SPLITS} for name in raw}
    for split in SPLITS:
        for pair in splits[split]:
            sources[pair.source][split] += 1
    return {"builder_version": BUILDER_VERSION, "params": params,
            "splits": {s: len(splits[s]) for s in SPLITS}, "sources": sources,
            "raw_pairs": {name: len(pairs) for name, pairs in raw.items()},
            "filtered": dict(sorted(filtered.items())), "split_removed": removed,
            "source_dropped": {name: dict(sorted((dropped or {}).get(name, Counter()).items()))
                               for name in raw},
            "packages": {pkg: path.name for pkg, path in debs.items()},
            "build_seconds": round(seconds, 1)}


def refuse_foreign_corpus(corpus_dir: Path) -> None:
    """Stop before replacing a corpus this builder did not write (no ``stats.json`` of its own,
    e.g. the user's own files): building would overwrite it. ``force`` skips this check."""
    if (corpus_dir / "stats.json").is_file() or not corpus_dir.is_dir():
        return
    held = sorted(p.name for p in corpus_dir.iterdir() if p.is_file())
    if held:
        data_dir = corpus_dir.parent
        raise CorpusError(
            f"{corpus_dir} holds a corpus tf-nmt did not build ({', '.join(held[:4])}"
            f"{', ...' if len(held) > 4 else ''}): building the built-in corpus would replace it; "
            f"to learn its vocabulary run `tf-nmt prepare-data --data-dir {data_dir} --vocab-only`, "
            "or pass --force to replace it")


# The split sizes and seed prepare_corpus uses when not given (also prepare-data's defaults).
SPLIT_DEFAULTS = {"dev_size": 500, "test_size": 1000, "seed": 1234}


def prepare_corpus(data_dir: Path, debs_dir: Optional[Path] = None,
                   dev_size: int = SPLIT_DEFAULTS["dev_size"],
                   test_size: int = SPLIT_DEFAULTS["test_size"],
                   seed: int = SPLIT_DEFAULTS["seed"], force: bool = False,
                   log: Log = print) -> dict:
    """Build (or reuse) ``data_dir/corpus/{train,dev,test}.{en,de}`` and return its stats.

    ``.deb`` files are looked up in ``debs_dir`` first, then ``data_dir/debs``, and
    otherwise fetched there with ``apt-get download``.
    """
    data_dir = Path(data_dir)
    corpus_dir = data_dir / "corpus"
    params = _params(dev_size, test_size, seed)
    if not force:
        cached = load_cached(corpus_dir, params)
        if cached is not None:
            log(f"corpus cache hit: {corpus_dir}")
            log(summary_table(cached))
            return cached
        refuse_foreign_corpus(corpus_dir)
    start = time.time()
    debs = debian.locate_debs(all_packages(), data_dir, Path(debs_dir) if debs_dir else None, log=log)
    roots = {pkg: debian.unpack_deb(deb, data_dir / "unpacked" / pkg) for pkg, deb in debs.items()}
    log("extracting pairs:")
    dropped: Dict[str, Counter] = {}
    raw = extract_all(roots, log=log, dropped=dropped)
    filtered: Counter = Counter()
    pairs = clean_and_dedupe((p for name in raw for p in raw[name]), filtered)
    result = split_pairs(pairs, dev_size=dev_size, test_size=test_size, seed=seed)
    splits = {s: result[s] for s in SPLITS}
    stats = build_stats(splits, raw, filtered, result["removed"], params, debs, time.time() - start,
                        dropped)
    write_corpus(corpus_dir, splits, stats)
    log(summary_table(stats))
    log(f"corpus written to {corpus_dir} in {stats['build_seconds']}s")
    return stats
