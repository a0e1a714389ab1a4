"""Sync vs async vs async + K-way global accumulation (K = number of workers), Transformer and
GNMT, over a learning-rate sweep; optionally artificial staleness for the synchronous runs.
Every run is ``tf-nmt train-async`` (a local parameter-server cluster) in a subprocess, then
``tf-nmt evaluate`` on the dev set. Writes ``experiments/async_sgd/results/async.json`` and prints a table.

    python -m experiments async --workers 4 --updates 2000 --lrs 0.0005,0.001,0.002 --kinds transformer,gnmt
    python -m experiments async --tiny --output /tmp/async-tiny.json

(``python -m experiments async`` takes the same arguments.) Modes (same number of *updates* U
for each):

  sync       k = N pushes per update, rounds of N waited for (synchronous SGD over N workers)
  async      k = 1: every push is an update (so for U updates it computes N times fewer
             gradients than sync; the comparison is per update)
  async+acc  k = N without rounds: one update per N pushes from whichever workers pushed
  sync+stale k = N rounds with gradients on parameters pulled every ``--stale-u`` updates
  downpour   k = 1, Downpour as Alibaba's system ran it: each worker pushes the mean of
             ``--n-push`` local gradients, fetches every ``--n-fetch`` of its steps, and clips
             each gradient to global norm ``--clip-norm`` (a push is n_push worker steps)

The server sums the K pushed gradients (no division by K), so with K > 1 the step is K times
that of one gradient, as in synchronous SGD with a summed (not averaged) gradient. ``--tiny`` is
a minutes-long smoke setting whose numbers mean nothing.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from experiments.lib import common
from tf_nmt.utils import machine
from tf_nmt.utils.io import write_json_atomic

KIND_SETTINGS = {
    "transformer": ["model.kind=transformer"],
    "gnmt": ["model.kind=gnmt", "train.schedule=constant"],
}
TINY = {"transformer": ["model.num_layers=1", "model.d_model=32", "model.num_heads=2",
                        "model.ff_dim=64", "model.dropout=0.0"],
        "gnmt": ["model.num_layers=2", "model.units=32", "model.dropout=0.0"]}
MODES = ("sync", "async", "async+acc", "sync+stale", "downpour")
DEFAULT_MODES = ("sync", "async", "async+acc", "sync+stale")


def mode_args(mode: str, workers: int, stale_u: int, n_push: int = 1, n_fetch: int = 1) -> List[str]:
    """The ``tf-nmt train-async`` options of one mode with ``workers`` workers."""
    n = str(workers)
    return {"sync": ["--k", n, "--synchronous"], "async": ["--k", "1"], "async+acc": ["--k", n],
            "sync+stale": ["--k", n, "--synchronous", "--refresh-every", str(stale_u)],
            "downpour": ["--k", "1", "--n-push", str(n_push), "--n-fetch", str(n_fetch)]}[mode]


def run_overrides(kind: str, lr: float, updates: int, tiny: bool, extra: Sequence[str],
                  mode: str = "async", clip_norm: float = 0.0) -> List[str]:
    """The ``--set`` items of one run (later items win); only Downpour clips."""
    clip = [f"train.clip_norm={clip_norm}"] if mode == "downpour" and clip_norm else []
    return (KIND_SETTINGS[kind] + (TINY[kind] if tiny else [])
            + [f"train.peak_lr={lr}", f"train.train_steps={updates}", *clip, *extra])


def row(kind: str, lr: float, mode: str, workers: int, report: Dict[str, Any],
        bleu: Optional[float], wall_seconds: float) -> Dict[str, Any]:
    """One run's result from its ``async.json`` report and dev BLEU (None: diverged)."""
    return {"kind": kind, "lr": lr, "mode": mode, "workers": workers,
            "k": report["k"], "updates": report["updates"],
            "pushes": report["pushes"], "final_loss": report["final_loss"],
            "diverged": report["diverged"], "dev_bleu": bleu,
            "staleness_mean": report["mean"], "staleness_max": report["max"],
            "staleness_histogram": report["histogram"],
            "n_push": report.get("n_push", 1), "n_fetch": report.get("n_fetch", 1),
            "clip_norm": report.get("clip_norm", 0.0),
            "clipped_fraction": report.get("clipped_fraction", 0.0),
            "worker_steps": report.get("worker_steps", report["pushes"]),
            "loss_by_gradients": loss_by_gradients(report["losses"]),
            "train_seconds": report["seconds"], "wall_seconds": wall_seconds}


def loss_by_gradients(losses: Sequence[float], points: int = 10) -> List[Dict[str, float]]:
    """The mean training loss of each tenth of a run, indexed by the gradients computed by its
    end (one per scheduled closure: a push, or a Downpour worker step). Modes that take one
    update per gradient (async) or per K gradients (sync, async+acc) compare at equal compute
    and equal training data here, which the final loss after the same *updates* does not."""
    n = len(losses)
    if n == 0:
        return []
    ends = sorted({max(1, round(n * i / points)) for i in range(1, points + 1)})
    out, start = [], 0
    for end in ends:
        window = losses[start:end]
        out.append({"gradients": end, "loss": sum(window) / len(window)})
        start = end
    return out


def loss_at(curve: Sequence[Dict[str, float]], gradients: int) -> Optional[float]:
    """The loss of the tenth of ``curve`` that ends nearest to ``gradients`` (the earlier of
    two as near), so that a run of 2,402 worker steps (Downpour's tenths end at 1,201) is read
    at 1,201 for 1,200, not a tenth earlier. None for an empty curve."""
    if not curve:
        return None
    return min(curve, key=lambda c: (abs(c["gradients"] - gradients), c["gradients"]))["loss"]


def table(runs: List[Dict[str, Any]]) -> str:
    """Final loss, the loss at the gradient count of the shortest run (equal compute and data),
    dev BLEU and staleness of every run."""
    ends = [r["loss_by_gradients"][-1]["gradients"] for r in runs if r.get("loss_by_gradients")]
    common_g = min(ends) if ends else 0
    lines = [f"{'kind':<12} {'lr':>8} {'mode':<11} {'k':>3} {'final loss':>10} "
             f"{f'loss@{common_g}g':>11} {'dev BLEU':>8} {'stale mean':>10} {'stale max':>9}"]
    for r in runs:
        bleu = "diverged" if r["diverged"] else f"{r['dev_bleu']:.2f}"
        at = loss_at(r.get("loss_by_gradients", []), common_g)
        at_g = f"{at:.4f}" if at is not None else "-"
        lines.append(f"{r['kind']:<12} {r['lr']:>8g} {r['mode']:<11} {r['k']:>3} "
                     f"{r['final_loss']:>10.4f} {at_g:>11} {bleu:>8} {r['staleness_mean']:>10.2f} "
                     f"{r['staleness_max']:>9}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The study's command line (also ``python -m experiments async``)."""
    ap = argparse.ArgumentParser(prog="python -m experiments async", description=__doc__.split("\n\n")[0])
    common.add_work_dir_args(ap, "async", common.results_path(__file__, "async.json"))
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--updates", type=int, default=2000)
    ap.add_argument("--lrs", default="0.0005,0.001,0.002")
    ap.add_argument("--kinds", default="transformer,gnmt")
    ap.add_argument("--modes", default=",".join(DEFAULT_MODES), help=f"comma list of {', '.join(MODES)}")
    ap.add_argument("--stale-u", type=int, default=4, help="U for sync+stale")
    ap.add_argument("--n-push", type=int, default=4, help="downpour: gradients per push")
    ap.add_argument("--n-fetch", type=int, default=4, help="downpour: worker steps per fetch")
    ap.add_argument("--clip-norm", type=float, default=1.0,
                    help="downpour: clip each gradient to this global norm (0: off)")
    ap.add_argument("--dev-limit", type=int, default=500)
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--resume", action="store_true",
                    help="reuse the finished runs in --work-dir trained with the same options; "
                         "rewrite --output with the grown grid")
    ap.add_argument("--max-new-runs", type=int, default=None, metavar="N",
                    help="train at most N runs not yet finished, then stop (the results file "
                         "keeps the finished ones; a later --resume goes on)")
    return ap


RUN_RECORD = "study_run.json"  # a finished run: its options, wall time and dev BLEU


def cell(args: argparse.Namespace, kind: str, lr: float, mode: str) -> Tuple[Path, List[str]]:
    """The run directory and ``tf-nmt train-async`` options of one (kind, lr, mode)."""
    options = ["--workers", str(args.workers),
               *mode_args(mode, args.workers, args.stale_u, args.n_push, args.n_fetch),
               *common.set_args(run_overrides(kind, lr, args.updates, args.tiny, args.set,
                                              mode, args.clip_norm))]
    return args.work_dir / f"{kind}-lr{lr:g}-{mode}", options


def check_resumable(args: argparse.Namespace, grid: Sequence[Tuple[str, float, str]]) -> None:
    """Before anything trains or is written: refuse a ``--resume`` whose finished runs were
    trained with other options (else the results file would be rewritten without them)."""
    for kind, lr, mode in grid:
        run, options = cell(args, kind, lr, mode)
        if (run / RUN_RECORD).is_file():
            record = json.loads((run / RUN_RECORD).read_text())
            if record["options"] != options or record["dev_limit"] != args.dev_limit:
                raise SystemExit(f"{run} was trained with other options ({record['options']}, "
                                 f"dev limit {record['dev_limit']}); pass --overwrite to "
                                 f"retrain the grid")


def finished_run(args: argparse.Namespace, kind: str, lr: float, mode: str,
                 earlier: Sequence[Dict[str, Any]] = ()) -> Optional[Dict[str, Any]]:
    """With ``--resume``, the row of one (kind, lr, mode) already finished with the same
    options: from its run directory, or else the row of ``earlier`` (the results file's runs),
    so a grid spread over sessions and machines resumes from the committed results file alone.
    None: it still has to be trained."""
    if not args.resume:
        return None
    run, options = cell(args, kind, lr, mode)
    record_path = run / RUN_RECORD
    if record_path.is_file():  # check_resumable matched its options
        record = json.loads(record_path.read_text())
        print(f"  reusing the finished run in {run}", flush=True)
        report = json.loads((run / "async.json").read_text())
        return {**row(kind, lr, mode, args.workers, report, record["dev_bleu"],
                      record["wall_seconds"]),
                "options": options, "dev_limit": args.dev_limit, "machine": record.get("machine")}
    for r in earlier:
        if (r.get("options") == options and r.get("dev_limit") == args.dev_limit
                and (r["kind"], r["lr"], r["mode"]) == (kind, lr, mode)):
            print(f"  reusing the finished run recorded in {args.output}", flush=True)
            return r
    return None


def train_one(args: argparse.Namespace, kind: str, lr: float, mode: str) -> Dict[str, Any]:
    """Train one (kind, lr, mode) from scratch and score it on the dev set."""
    run, options = cell(args, kind, lr, mode)
    record_path = run / RUN_RECORD
    if run.exists():  # an unfinished run (train-async starts fresh runs only)
        shutil.rmtree(run)
    t0 = time.perf_counter()
    common.run_tf_nmt("train-async", "--run-dir", str(run), "--data-dir", str(args.data_dir),
                      *options)
    report = json.loads((run / "async.json").read_text())
    bleu = None
    if not report["diverged"]:
        common.run_tf_nmt("evaluate", "--run-dir", str(run), "--split", "dev",
                          "--limit", str(args.dev_limit), "--output-json", str(run / "dev.json"))
        bleu = json.loads((run / "dev.json").read_text())["bleu"]
    wall = time.perf_counter() - t0
    where = machine.describe()
    write_json_atomic(record_path, {"options": options, "dev_limit": args.dev_limit,
                                    "dev_bleu": bleu, "wall_seconds": wall, "machine": where})
    return {**row(kind, lr, mode, args.workers, report, bleu, wall),
            "options": options, "dev_limit": args.dev_limit, "machine": where}


def grid_argv(argv: Optional[Sequence[str]]) -> List[str]:
    """The study's arguments without ``--max-new-runs`` (how many runs one invocation trains
    is not part of the grid), for the results file's command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--max-new-runs" in argv:
        i = argv.index("--max-new-runs")
        del argv[i:i + 2]
    return [a for a in argv if not a.startswith("--max-new-runs=")]


def payload(args: argparse.Namespace, argv: Sequence[str], runs: List[Dict[str, Any]],
            planned: int, invocation_seconds: float) -> Dict[str, Any]:
    """The results file: settings, the command, and the runs finished so far (of ``planned``).
    ``wall_seconds`` sums the runs' own wall times, so a grid spread over several invocations
    states what it cost in all; ``invocation_seconds`` is the last invocation's time alone."""
    return {"experiment": "async SGD with global accumulation (issue 8)",
            "command": common.command_line("async", argv),
            "tiny_smoke_setting": bool(args.tiny),
            "complete": len(runs) == planned, "planned_runs": planned,
            "settings": {"workers": args.workers, "updates": args.updates, "lrs": args.lrs,
                         "stale_u": args.stale_u, "dev_limit": args.dev_limit,
                         "downpour": {"n_push": args.n_push, "n_fetch": args.n_fetch,
                                      "clip_norm": args.clip_norm},
                         "overrides": args.set, "engine": "tf.distribute ParameterServerStrategy, "
                         "1 ps + N worker server processes on 127.0.0.1"},
            "runs": runs, "wall_seconds": sum(r.get("wall_seconds") or 0.0 for r in runs),
            "invocation_seconds": invocation_seconds}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Train and evaluate every (kind, lr, mode); write the results and print the table."""
    parser = build_parser()
    args = parser.parse_args(argv)
    for mode in args.modes.split(","):
        if mode not in MODES:
            parser.error(f"unknown mode {mode!r} (use {', '.join(MODES)})")
    for kind in args.kinds.split(","):
        if kind not in KIND_SETTINGS:
            parser.error(f"unknown kind {kind!r} (use {', '.join(KIND_SETTINGS)})")
    try:
        lrs = [float(x) for x in args.lrs.split(",")]
    except ValueError:
        parser.error(f"--lrs takes a comma list of numbers, got {args.lrs!r}")
    if any(not lr > 0 for lr in lrs):
        parser.error(f"every learning rate in --lrs must be > 0, got {args.lrs!r}")
    if args.n_push < 1 or args.n_fetch < 1 or args.clip_norm < 0:
        parser.error("--n-push and --n-fetch must be >= 1 and --clip-norm >= 0")
    if args.tiny:
        args.workers, args.updates = min(args.workers, 2), min(args.updates, 20)
        args.dev_limit = min(args.dev_limit, 30)
    if args.overwrite and args.resume:
        parser.error("--overwrite and --resume exclude each other")
    if args.max_new_runs is not None and args.max_new_runs < 1:
        parser.error(f"--max-new-runs must be >= 1, got {args.max_new_runs}")
    if not args.resume:
        common.refuse_existing([args.output, args.work_dir], args.overwrite)
        if args.work_dir.exists():
            shutil.rmtree(args.work_dir)
    start = time.perf_counter()
    grid = [(kind, lr, mode) for kind in args.kinds.split(",") for lr in lrs
            for mode in args.modes.split(",")]
    if args.resume:
        check_resumable(args, grid)
    earlier = (json.loads(args.output.read_text()).get("runs", [])
               if args.resume and args.output.is_file() else [])
    runs: List[Dict[str, Any]] = []
    trained, command_argv = 0, grid_argv(argv)
    for kind, lr, mode in grid:  # the results file grows after every run: a cut grid keeps them
        done = finished_run(args, kind, lr, mode, earlier)
        if done is None and args.max_new_runs is not None and trained >= args.max_new_runs:
            continue  # left for a later --resume
        if done is None:
            trained += 1
            done = train_one(args, kind, lr, mode)
        runs.append(done)
        common.write_result(args.output, payload(args, command_argv, runs, len(grid),
                                                 time.perf_counter() - start), overwrite=True)
    print("\n" + table(runs))
    left = len(grid) - len(runs)
    print(f"wrote {args.output}" + (f" ({left} of {len(grid)} runs left for --resume)" if left else ""))
    return 0
