"""``own-corpus-memory``: training memory does not grow with the corpus (issue 44; target: the
peak RSS of training on 4.5M pairs at most 1.10x that on 0.45M pairs).

Both corpora come from the same synthetic generator and seed, the 0.45M one being the first
450,000 pairs of the 4.5M one (:mod:`.make_synthetic`), prepared by ``tf-nmt prepare-data`` with
the same vocabulary (the 0.45M one with ``--spm-model`` of the 4.5M one's), so the runs differ only
in the corpus size. Each run is a fresh ``tf-nmt train`` process of ``--steps`` steps (same
preset, batch and shuffle buffer), its process tree's RSS polled every 0.2 s; runs alternate
(0.45M, 4.5M, 0.45M, 4.5M, ...) so that a drift of the host falls on both. Reported: each run's peak
RSS and wall time, and the median over rounds of the 4.5M / 0.45M ratio of the peaks.

The prepared data dirs are reused from the work dir when their stamp matches (e.g. after
``own-corpus-prepare``); otherwise they are made first (about 5 minutes for 4.5M pairs).

    python -m experiments own-corpus-memory                  # 2 rounds of 30 steps on each corpus
    python -m experiments own-corpus-memory --tiny           # 20k / 5k pairs, 3 steps, 1 round
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from experiments.lib import common
from experiments.own_corpus import corpora
from experiments.own_corpus.measure import check_ok, run_measured
from tf_nmt.utils import machine

TARGET_RATIO = 1.10
TINY = {"pairs": 20_000, "small_pairs": 5_000, "vocab_size": 1000, "steps": 3, "rounds": 1}


def train_args(run_dir: Path, data: Path, args: argparse.Namespace) -> List[str]:
    """The ``tf-nmt train`` arguments of one measured run (one cycle of ``--steps`` steps)."""
    overrides = [f"train.train_steps={args.steps}", f"train.steps_per_cycle={args.steps}",
                 *args.set]
    return ["train", "--run-dir", str(run_dir), "--data-dir", str(data), "--preset", args.preset,
            *common.set_args(overrides)]


def summarise(runs: Mapping[str, List[Mapping[str, Any]]]) -> Dict[str, Any]:
    """Median peak per corpus and the median over rounds of the large / small peak ratio."""
    ratios = [large["peak_rss_mb"] / small["peak_rss_mb"]
              for small, large in zip(runs["small"], runs["large"])]
    return {"small_peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in runs["small"]),
            "large_peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in runs["large"]),
            "ratios": ratios, "ratio": statistics.median(ratios),
            "target_ratio": TARGET_RATIO, "within_target": statistics.median(ratios) <= TARGET_RATIO}


def measure(args: argparse.Namespace) -> Dict[str, Any]:
    load_before = [round(v, 2) for v in os.getloadavg()]
    work = Path(args.work_dir)
    corpora.ensure_prepared(work, args.pairs, args.vocab_size, args.seed, args.gzip,
                                    args.prepare_arg)
    spm = corpora.vocab_model(corpora.data_dir(work, args.pairs))
    corpora.ensure_prepared(work, args.small_pairs, args.vocab_size, args.seed, args.gzip,
                                    args.prepare_arg, spm_model=spm)
    sizes = {"small": args.small_pairs, "large": args.pairs}
    runs: Dict[str, List[Dict[str, Any]]] = {"small": [], "large": []}
    for r in range(args.rounds):
        for label in ("small", "large"):
            run_dir = work / "memory-runs" / f"{label}-r{r}"
            if run_dir.exists():
                shutil.rmtree(run_dir)
            cmd = [*common.tf_nmt_command(),
                   *train_args(run_dir, corpora.data_dir(work, sizes[label]), args)]
            log = work / "logs" / f"memory-{label}-r{r}.log"
            print("$ " + " ".join(cmd), flush=True)
            result = run_measured(cmd, log, timeout=args.timeout)
            check_ok(result, cmd, log)
            runs[label].append({k: result[k] for k in ("peak_rss_mb", "wall_s")})
            print(f"round {r + 1}/{args.rounds} {sizes[label]:,} pairs: peak RSS "
                  f"{result['peak_rss_mb']:,.0f} MB, {result['wall_s']:.1f} s", flush=True)
            shutil.rmtree(run_dir)
    manifests = {label: corpora.read_manifest(corpora.data_dir(work, n)) for label, n in sizes.items()}
    return {"what": "peak RSS of tf-nmt train on a 0.45M and a 4.5M-pair prepared corpus, "
                    "alternating fresh processes",
            "command": common.command_line("own-corpus-memory", args.argv),
            "machine": machine.describe(load=True, load_before=load_before),
            "settings": {"pairs": sizes, "steps": args.steps, "rounds": args.rounds,
                         "preset": args.preset, "set": args.set, "vocab_size": args.vocab_size,
                         "seed": args.seed, "work_dir": str(work),
                         "train_args": train_args(Path("RUN_DIR"), Path("DATA_DIR"), args)},
            "corpora": {label: {"train_pairs": m.get("splits", {}).get("train", {}).get("pairs"),
                                "shards": m.get("shards", {}).get("count"),
                                "vocab_fingerprint": m.get("vocab", {}).get("fingerprint")}
                        for label, m in manifests.items()},
            "runs": runs, **summarise(runs)}


def format_table(result: Mapping[str, Any]) -> str:
    pairs = result["settings"]["pairs"]
    lines = [f"tf-nmt train, {result['settings']['steps']} steps, on {result['machine'].get('cpu')}",
             "", "| round | corpus pairs | peak RSS MB | wall s |", "|---|---|---|---|"]
    for r in range(result["settings"]["rounds"]):
        for label in ("small", "large"):
            run = result["runs"][label][r]
            lines.append(f"| {r + 1} | {pairs[label]:,} | {run['peak_rss_mb']:,.0f} | "
                         f"{run['wall_s']:,.1f} |")
    lines += ["", f"peak RSS, {pairs['large']:,} / {pairs['small']:,} pairs: "
              f"{result['ratio']:.3f} (per round "
              + ", ".join(f"{x:.3f}" for x in result["ratios"])
              + f"); target <= {TARGET_RATIO}: {'met' if result['within_target'] else 'NOT met'}"]
    return "\n".join(lines)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m experiments own-corpus-memory",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=corpora.LARGE, help="the large corpus")
    p.add_argument("--small-pairs", type=int, default=corpora.SMALL,
                   help="the small corpus (the head of the large one)")
    p.add_argument("--seed", type=int, default=1, help="of the synthetic corpus")
    p.add_argument("--gzip", action="store_true", help="give prepare-data gzipped input files")
    p.add_argument("--vocab-size", type=int, default=32000)
    p.add_argument("--prepare-arg", action="append", default=[], metavar="ARG",
                   help="an extra prepare-data argument (as own-corpus-prepare: the data dirs are "
                        "reused only when these match)")
    p.add_argument("--steps", type=int, default=30, help="training steps per run")
    p.add_argument("--rounds", type=int, default=2, help="alternating (small, large) rounds")
    p.add_argument("--preset", default="transformer-base")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="config override of every training run")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per training run")
    corpora.add_study_args(p, "corpora, prepared data, runs",
                           "20k / 5k pairs, a 1000-piece vocabulary, 3 steps, 1 round",
                           "own_corpus_memory.json")
    args = p.parse_args(argv)
    args.argv = list(argv) if argv is not None else None
    corpora.apply_tiny(args, p, TINY, model=True)
    if not 0 < args.small_pairs < args.pairs:
        p.error("--small-pairs must be positive and smaller than --pairs")
    for name in ("steps", "rounds"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    return corpora.run_study(parse_args(argv), __file__, "own_corpus_memory.json", measure, format_table)
