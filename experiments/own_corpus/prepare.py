"""``own-corpus-prepare``: how long ``tf-nmt prepare-data`` takes on a 4.5M-pair corpus of one's
own, and how much memory it needs (issue 44; target: within 15 minutes).

The corpus is synthetic (:mod:`.make_synthetic`: WMT14-shaped English-like and German-like
text, :mod:`.textgen`, with planted noise), generated into the work directory first, outside the timing. Then one real
``tf-nmt prepare-data --train-src ... --train-tgt ... --vocab-size 32000`` subprocess prepares
it from scratch, measured from outside: wall time, pairs/s, the peak RSS of its process tree
(polled: the parent and its encoding workers together) and the peak of its largest single
process (the kernel's high-water mark). The time of each of its passes (validate, heldout,
distribute, vocab, shards) comes from the ``timings`` the command writes into the manifest. The
noise planted in the corpus is set beside what the cleaning removed, reason by reason.

``--resume-check`` then prepares the same corpus into a second data directory, SIGKILLs the
whole process group midway (by default at half the uninterrupted run's wall time), runs the same
command again and records that it resumed (its output says so), how long the two attempts took
together against the uninterrupted run, and whether the shards came out byte-identical to it.

The prepared directory stays in the work dir (with a stamp of its command) for
``own-corpus-memory`` and ``own-corpus-pipeline`` to reuse.

    python -m experiments own-corpus-prepare                     # 5M pairs (~15 min + 1 min corpus)
    python -m experiments own-corpus-prepare --resume-check      # and the kill / resume run
    python -m experiments own-corpus-prepare --tiny              # 20k pairs, seconds (result: work dir)
"""
from __future__ import annotations

import argparse
import filecmp
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from experiments.lib import common
from experiments.own_corpus import corpora
from tf_nmt.utils import machine

TARGET_MINUTES = 15.0
TINY = {"pairs": 20_000, "vocab_size": 1000}
# Planted noise (make_synthetic) -> the cleaning count that should find it.
PLANTED_AS = {"empty_src": "empty", "empty_tgt": "empty", "overlong": "too_long",
              "misaligned": "ratio", "duplicate": "duplicates"}


def cleaning_check(planted: Mapping[str, int], cleaning: Mapping[str, Mapping[str, int]]
                   ) -> Dict[str, Dict[str, Optional[int]]]:
    """Per cleaning reason: the pairs planted for it and the pairs it removed, summed over the
    splits (dev carved from train takes its share of the duplicates; a train pair whose twin
    went to dev is removed as ``overlap``, which has no planted count of its own)."""
    rows: Dict[str, Dict[str, Optional[int]]] = {}
    for kind, reason in PLANTED_AS.items():
        row = rows.setdefault(reason, {"planted": 0, "removed": sum(
            int(counts.get(reason, 0)) for counts in cleaning.values())})
        row["planted"] = (row["planted"] or 0) + int(planted.get(kind, 0))
    rows["overlap"] = {"planted": None,
                       "removed": sum(int(c.get("overlap", 0)) for c in cleaning.values())}
    return rows


def timing_summary(timings: Mapping[str, Any]) -> Dict[str, Any]:
    """The manifest's ``timings`` (``seconds`` by pass: validate, heldout, distribute, vocab,
    shards) with the two headline passes picked out: ``vocab_s`` (learning the vocabulary) and
    ``encode_s`` (encoding the shards)."""
    seconds = timings.get("seconds", {})
    numbers = {k: float(v) for k, v in seconds.items() if isinstance(v, (int, float))}
    return {"vocab_s": numbers.get("vocab"), "encode_s": numbers.get("shards"), "passes": numbers}


def said_it_resumed(log_text: str) -> List[str]:
    """The lines of a prepare-data output that report work reused from an earlier (killed) run:
    the partial build resumed, passes skipped ("done by an earlier run"), shards reused."""
    return [line.strip() for line in log_text.splitlines()
            if re.search(r"by an earlier run|resuming the partial build", line)]


def same_shards(a: Path, b: Path) -> bool:
    """Whether two prepared data dirs hold byte-identical shards (the same names, the same bytes)."""
    names_a = sorted(p.name for p in (a / "shards").glob("*"))
    names_b = sorted(p.name for p in (b / "shards").glob("*"))
    return bool(names_a) and names_a == names_b and all(
        filecmp.cmp(a / "shards" / n, b / "shards" / n, shallow=False) for n in names_a)


def resume_check(args: argparse.Namespace, uninterrupted: Mapping[str, Any]) -> Dict[str, Any]:
    """Kill a second prepare of the same corpus midway (``--kill-after`` seconds in, default half
    the uninterrupted run, or when its output shows ``--kill-when``), rerun it; what happened."""
    work = Path(args.work_dir)
    target = work / f"data-{args.pairs}-resume"
    corpora.remove_prepared(target)
    prep = corpora.prepare_args(work, args.pairs, args.vocab_size, args.gzip, args.prepare_arg,
                                target=target)
    kill_after = (args.kill_after or uninterrupted["wall_s"] / 2) if not args.kill_when else None
    logs = work / "logs"
    killed = corpora.run_prepare(prep, logs / f"prepare-{args.pairs}-killed.log",
                                 kill_after=kill_after, kill_when=args.kill_when)
    rerun = corpora.run_prepare(prep, logs / f"prepare-{args.pairs}-rerun.log")
    said = said_it_resumed((logs / f"prepare-{args.pairs}-rerun.log").read_text(errors="replace"))
    total = killed["wall_s"] + rerun["wall_s"]
    record = {"kill_after_s": kill_after, "kill_when": args.kill_when, "killed": killed,
              "rerun": rerun,
              "resumed": bool(killed["killed"] and said), "resume_lines": said[:5],
              "total_s": total, "total_vs_uninterrupted": total / uninterrupted["wall_s"],
              "rerun_vs_uninterrupted": rerun["wall_s"] / uninterrupted["wall_s"],
              "vocab_identical": (corpora.read_manifest(target)["vocab"].get("fingerprint")
                                  == corpora.read_manifest(corpora.data_dir(work, args.pairs))
                                  ["vocab"].get("fingerprint")),
              "shards_identical": same_shards(corpora.data_dir(work, args.pairs), target),
              "rerun_timings": corpora.read_manifest(target).get("timings", {})}
    if not killed["killed"]:
        record["note"] = ("prepare-data finished before the kill: nothing to resume; lower "
                          "--kill-after")
    corpora.remove_prepared(target)  # a second copy of the prepared corpus is not needed
    return record


def measure(args: argparse.Namespace) -> Dict[str, Any]:
    load_before = [round(v, 2) for v in os.getloadavg()]
    work = Path(args.work_dir)
    synthetic = corpora.ensure_synthetic(work, args.pairs, args.seed, args.gzip)
    corpora.stamp_path(work, args.pairs).unlink(missing_ok=True)   # always a fresh, timed run
    prepared = corpora.ensure_prepared(work, args.pairs, args.vocab_size, args.seed, args.gzip,
                                       args.prepare_arg)
    run = prepared["measured"]
    manifest = corpora.read_manifest(corpora.data_dir(work, args.pairs))
    timings = manifest.get("timings", {})
    result: Dict[str, Any] = {
        "what": "tf-nmt prepare-data on a synthetic own corpus, timed and memory-polled from outside",
        "command": common.command_line("own-corpus-prepare", args.argv),
        "machine": machine.describe(load=True, load_before=load_before),
        "settings": {"pairs": args.pairs, "seed": args.seed, "gzip": args.gzip,
                     "vocab_size": args.vocab_size, "prepare_args": prepared["args"],
                     "work_dir": str(work)},
        "synthetic": {k: synthetic[k] for k in ("pairs", "planted", "clean_pairs", "src_bytes",
                                                "tgt_bytes", "seconds") if k in synthetic},
        "wall_s": run["wall_s"], "pairs_per_s": args.pairs / run["wall_s"],
        "peak_rss_mb": run["peak_rss_mb"], "largest_process_mb": run["largest_process_mb"],
        "timings": timings, **timing_summary(timings),
        "splits": manifest.get("splits", {}), "shards": manifest.get("shards", {}).get("count"),
        "vocab": {k: v for k, v in manifest.get("vocab", {}).items() if k != "path"},
        "cleaning": cleaning_check(synthetic["planted"], manifest.get("cleaning", {})),
        "target_minutes": TARGET_MINUTES,
        "within_target": run["wall_s"] <= TARGET_MINUTES * 60}
    if args.resume_check:
        result["resume_check"] = resume_check(args, run)
    return result


def _num(value: Optional[float], fmt: str = "{:,.1f}") -> str:
    return "-" if value is None else fmt.format(value)


def format_table(result: Mapping[str, Any]) -> str:
    """The measurement as Markdown tables."""
    cpu = result["machine"].get("cpu") or "unknown CPU"
    lines = [f"prepare-data of {result['settings']['pairs']:,} synthetic pairs on {cpu} "
             f"({result['machine'].get('cpus')} cores)", "",
             "| vocabulary s | encoding s | total wall s | pairs/s | peak RSS, process tree MB "
             "| largest process MB | within 15 min |", "|---|---|---|---|---|---|---|",
             f"| {_num(result['vocab_s'])} | {_num(result['encode_s'])} | "
             f"{result['wall_s']:,.1f} | {result['pairs_per_s']:,.0f} | "
             f"{result['peak_rss_mb']:,.0f} | {result['largest_process_mb']:,.0f} | "
             f"{'yes' if result['within_target'] else 'NO'} |", "",
             "| pass | seconds |", "|---|---|"]
    lines += [f"| {k} | {v:,.1f} |" for k, v in result["passes"].items()]
    lines += ["", "| cleaning reason | planted | removed (all splits) |", "|---|---|---|"]
    lines += [f"| {reason} | {_num(row['planted'], '{:,}')} | {_num(row['removed'], '{:,}')} |"
              for reason, row in result["cleaning"].items()]
    check = result.get("resume_check")
    if check:
        yes = lambda flag: "yes" if flag else "NO"  # noqa: E731
        lines += ["", "| resume check | killed at s | rerun s | total s | total / uninterrupted "
                  "| resumed | vocabulary, shards identical to the uninterrupted run |",
                  "|---|---|---|---|---|---|---|",
                  f"| | {check['killed']['wall_s']:,.1f} | {check['rerun']['wall_s']:,.1f} | "
                  f"{check['total_s']:,.1f} | {check['total_vs_uninterrupted']:.2f} | "
                  f"{yes(check['resumed'])} | {yes(check['vocab_identical'])}, "
                  f"{yes(check['shards_identical'])} |"]
    return "\n".join(lines)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m experiments own-corpus-prepare",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=corpora.LARGE)
    p.add_argument("--seed", type=int, default=1, help="of the synthetic corpus")
    p.add_argument("--gzip", action="store_true", help="give prepare-data gzipped input files")
    p.add_argument("--vocab-size", type=int, default=32000)
    p.add_argument("--prepare-arg", action="append", default=[], metavar="ARG",
                   help="an extra prepare-data argument, e.g. --prepare-arg=--workers=2 (repeatable)")
    p.add_argument("--resume-check", action="store_true",
                   help="also kill a second prepare midway and rerun it")
    p.add_argument("--kill-after", type=float, default=None,
                   help="seconds into the second prepare to kill it (default: half the first's)")
    p.add_argument("--kill-when", default=None, metavar="TEXT",
                   help="kill the second prepare as soon as its output shows TEXT instead, e.g. "
                        "'vocab: learning' (the tiny test's choice: a deterministic point)")
    corpora.add_study_args(p, "corpora and prepared data",
                           f"{TINY['pairs']:,} pairs, a {TINY['vocab_size']}-piece vocabulary; "
                           "the result goes to the work dir unless --out",
                           "own_corpus_prepare.json")
    args = p.parse_args(argv)
    args.argv = list(argv) if argv is not None else None
    corpora.apply_tiny(args, p, TINY)
    if args.pairs < 10:
        p.error("--pairs must be >= 10")
    if (args.kill_after is not None or args.kill_when) and not args.resume_check:
        p.error("--kill-after and --kill-when are read only with --resume-check")
    if args.kill_after is not None and args.kill_when:
        p.error("give --kill-after or --kill-when, not both")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    return corpora.run_study(parse_args(argv), __file__, "own_corpus_prepare.json", measure, format_table)
