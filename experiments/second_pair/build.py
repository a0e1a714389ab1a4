"""Build an English-Russian corpus from Debian packages: a second, non-Latin language pair.

The same public sources as the built-in en-de corpus, in Russian: LibreOffice help (en-US vs ru
HTML, aligned by paragraph id), LibreOffice UI catalogs, GCC messages, the Debian Administrator's
Handbook (en-US vs ru-RU), the GNOME user docs (C vs ru), and the Russian message catalogs of
a few command-line tools (coreutils, glibc, tar, findutils, diffutils, grep, sed, apt). Packages are fetched with
``apt-get download`` and unpacked without installing, by :mod:`tf_nmt.data.builtin_corpus.debian`; the
extractors, clean-up and split are the built-in corpus's (:mod:`tf_nmt.data.builtin_corpus`), called with
the language ``ru``. ``Pair.de`` carries the Russian side.

Dev and test are whole LibreOffice help *pages* (the group of a pair is its page), chosen by a
seeded hash like :func:`tf_nmt.data.builtin_corpus.split.split_pairs` chooses Ding entries; any train pair
sharing a (case-folded) side with a held-out pair is dropped, so nothing leaks.

    python -m experiments.second_pair.build --out data_cache/second_pair/en-ru
    # -> train.{en,ru}, dev.{en,ru}, test.{en,ru}, *.meta.tsv (source, page), stats.json
"""
from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence

from tf_nmt.data.builtin_corpus import builder, debian
from tf_nmt.data.builtin_corpus.pairs import Pair
from tf_nmt.data.builtin_corpus.sources import gettext_catalog, gnome_docs, handbook, libreoffice_help
from tf_nmt.data.builtin_corpus.sources.registry import SourceSpec
from tf_nmt.data.builtin_corpus.split import SPLITS, split_pairs

SRC_LANG, TGT_LANG = "en", "ru"
BUILD_VERSION = "1"
EVAL_SOURCE = "lo_help"  # dev and test are whole pages of the LibreOffice help
DEFAULT_CACHE = Path("data_cache")  # .debs in <cache>/debs, unpacked trees in <cache>/unpacked
DEFAULT_OUT = DEFAULT_CACHE / "second_pair" / "en-ru"
# Command-line tools whose packages carry Russian message catalogs (source "gnu").
GNU_PACKAGES = ("coreutils", "libc-l10n", "tar", "findutils", "diffutils", "grep", "sed", "apt")


def ru_sources() -> List[SourceSpec]:
    """The built-in corpus's extractors, pointed at the Russian side of each package."""
    return [
        SourceSpec("lo_help", ("libreoffice-help-en-us", "libreoffice-help-ru"),
                   lambda r, _d: libreoffice_help.extract([r["libreoffice-help-en-us"]],
                                                          [r["libreoffice-help-ru"]], lang="ru")),
        SourceSpec("lo_ui", ("libreoffice-l10n-ru",),
                   lambda r, _d: gettext_catalog.extract_lo_ui([r["libreoffice-l10n-ru"]], lang="ru")),
        SourceSpec("gcc", ("gcc-12-locales",),
                   lambda r, _d: gettext_catalog.extract_gcc([r["gcc-12-locales"]], lang="ru")),
        SourceSpec("handbook", ("debian-handbook",),
                   lambda r, _d: handbook.extract([r["debian-handbook"]], lang_dir="ru-RU")),
        SourceSpec("gnome", ("gnome-user-docs",),
                   lambda r, d: gnome_docs.extract([r["gnome-user-docs"]], d, lang="ru")),
        SourceSpec("gnu", GNU_PACKAGES, lambda r, _d: message_pairs([r[p] for p in GNU_PACKAGES])),
    ]


def message_pairs(roots: Iterable[Path], lang: str = TGT_LANG, source: str = "gnu") -> Iterator[Pair]:
    """Pairs of every ``lang`` gettext catalog under ``roots`` (command-line tools' messages)."""
    for root in roots:
        for mo in gettext_catalog.language_catalogs(root, lang):
            yield from gettext_catalog.catalog_pairs(mo, source, mo.stem)


def packages(sources: Sequence[SourceSpec]) -> List[str]:
    """Every package the sources need, in a stable order."""
    seen: List[str] = []
    for spec in sources:
        seen.extend(p for p in spec.packages if p not in seen)
    return seen


def document(group: str) -> str:
    """The document a pair's group belongs to: ``lo_help:text/x.html#par_id1`` -> ``lo_help:text/x.html``.

    Catalog groups (``lo_ui:<catalog>:<msgid>``) have no ``#`` and stay one message each."""
    return group.split("#", 1)[0]


def by_document(pairs: Iterable[Pair]) -> List[Pair]:
    """The pairs regrouped by :func:`document`, so that a held-out split takes whole pages."""
    return [pair._replace(group=document(pair.group)) for pair in pairs]


def write_splits(out_dir: Path, splits: Dict[str, List[Pair]], stats: dict) -> None:
    """``<split>.en``, ``<split>.ru``, ``<split>.meta.tsv`` (source, page) and ``stats.json``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        pairs = splits[split]
        for ext, column in ((SRC_LANG, 0), (TGT_LANG, 1)):
            with open(out_dir / f"{split}.{ext}", "w", encoding="utf-8", newline="\n") as handle:
                handle.writelines(p[column] + "\n" for p in pairs)
        with open(out_dir / f"{split}.meta.tsv", "w", encoding="utf-8", newline="\n") as handle:
            handle.writelines(f"{p.source}\t{p.group}\n" for p in pairs)
    (out_dir / "stats.json").write_text(json.dumps(stats, indent=2, sort_keys=True) + "\n",
                                        encoding="utf-8")


def split_corpus(raw: Dict[str, List[Pair]], dev_size: int, test_size: int,
                 seed: int) -> tuple:
    """Clean, dedupe and split the raw pairs: (splits, filtered counts, split removals)."""
    filtered: Counter = Counter()
    pairs = builder.clean_and_dedupe(by_document(p for name in raw for p in raw[name]), filtered)
    result = split_pairs(pairs, dev_size=dev_size, test_size=test_size, seed=seed,
                         eval_source=EVAL_SOURCE)
    return {s: result[s] for s in SPLITS}, filtered, result["removed"]


def build(out_dir: Path = DEFAULT_OUT, cache: Path = DEFAULT_CACHE, dev_size: int = 500,
          test_size: int = 1000, seed: int = 1234, log=print) -> dict:
    """Download/unpack the packages into ``cache``, extract, clean and split; write ``out_dir``."""
    start = time.time()
    sources = ru_sources()
    debs = debian.locate_debs(packages(sources), Path(cache), None, log=log)
    roots = {pkg: debian.unpack_deb(deb, Path(cache) / "unpacked" / pkg) for pkg, deb in debs.items()}
    log("extracting en-ru pairs:")
    dropped: Dict[str, Counter] = {}
    raw = builder.extract_all(roots, log=log, sources=sources, dropped=dropped)
    splits, filtered, removed = split_corpus(raw, dev_size, test_size, seed)
    params = {"dev_size": dev_size, "test_size": test_size, "seed": seed,
              "sources": [s.name for s in sources], "eval_source": EVAL_SOURCE,
              "langs": [SRC_LANG, TGT_LANG], "build_version": BUILD_VERSION}
    stats = builder.build_stats(splits, raw, filtered, removed, params, debs, time.time() - start,
                                dropped)
    stats["held_out_documents"] = {s: len({p.group for p in splits[s]}) for s in ("dev", "test")}
    write_splits(Path(out_dir), splits, stats)
    log(builder.summary_table(stats))
    log(f"en-ru corpus written to {out_dir} in {stats['build_seconds']}s")
    return stats


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.second_pair.build",
                                description="build the en-ru corpus from Debian packages")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                   help="holds debs/ (apt-get download target) and unpacked/")
    p.add_argument("--dev-size", type=int, default=500)
    p.add_argument("--test-size", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1234)
    args = p.parse_args(argv)
    build(args.out, args.cache, args.dev_size, args.test_size, args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
