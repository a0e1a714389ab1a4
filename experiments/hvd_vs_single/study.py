"""BLEU of a ``horovodrun -np N`` training run against one process at the same effective batch.

    python -m experiments hvd-vs-single --steps 4000                 # quickstart, N = 2
    python -m experiments hvd-vs-single --steps 20 --limit 50 --work-dir /tmp/cmp \\
        --out /tmp/cmp/hvd_vs_single.json                    # a smoke run

(``python -m experiments hvd-vs-single`` takes the same arguments.) Runs, one after the other:

1. ``tf-nmt train`` single-process with ``data.batch_tokens = N x B``;
2. ``horovodrun -np N -H localhost:N --gloo tf-nmt train`` with ``data.batch_tokens = B`` per
   rank and ``train.scale_lr_with_workers=false`` -- the same tokens per update and the same
   learning-rate schedule as run 1 (``--scale-lr`` instead scales both runs' LR/warm-up by N,
   the trainer's rule for N workers);
3. ``tf-nmt evaluate --split test`` of both runs;

and writes BLEU, chrF, the difference and the exact commands to ``--out`` (default
``experiments/hvd_vs_single/results/hvd_vs_single.json``). Existing run directories are resumed
(the trainer refuses mismatched ones), so an interrupted comparison can be restarted with the
same command.
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from experiments.lib import launcher
from experiments.lib import common
from tf_nmt.training.schedules import scale_lr, scale_warmup


def run_logged(cmd: List[str], log_path: Path, env: Mapping[str, str]) -> float:
    """Run ``cmd`` (output to ``log_path``); its wall seconds. Fails with the log's tail."""
    print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.run(cmd, env=dict(env), stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = log_path.read_text()[-3000:]
        raise SystemExit(f"command failed ({proc.returncode}), see {log_path}:\n{tail}")
    return time.perf_counter() - t0


def run_settings(args: argparse.Namespace) -> Dict[str, Tuple[int, List[str]]]:
    """``{name: (ranks, overrides)}`` of the one-process run and the N-rank run."""
    cfg = common.study_config(args.preset, args.set, args.batch_tokens)  # validates overrides
    shared = [f"train.train_steps={args.steps}", "train.time_budget_minutes=0", *args.set]
    if args.scale_lr:
        single_sched = [f"train.peak_lr={scale_lr(cfg.train.peak_lr, args.np)}",
                        f"train.warmup_steps={scale_warmup(cfg.train.warmup_steps, args.np)}"]
        hvd_sched = ["train.scale_lr_with_workers=true"]
    else:
        single_sched, hvd_sched = [], ["train.scale_lr_with_workers=false"]
    return {
        "single": (1, [f"data.batch_tokens={args.np * args.batch_tokens}", *shared, *single_sched]),
        f"hvd{args.np}": (args.np, [f"data.batch_tokens={args.batch_tokens}", *shared, *hvd_sched]),
    }


def build_parser() -> argparse.ArgumentParser:
    """The study's command line (also ``python -m experiments hvd-vs-single``)."""
    p = argparse.ArgumentParser(prog="python -m experiments hvd-vs-single",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, required=True, help="train.train_steps of both runs")
    p.add_argument("--np", type=int, default=2, help="Horovod ranks")
    p.add_argument("--batch-tokens", type=int, default=4096, help="tokens per batch and rank")
    p.add_argument("--preset", default="quickstart")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="extra overrides for both runs")
    p.add_argument("--scale-lr", action="store_true",
                   help="scale peak LR x N and warm-up / N in both runs (default: unscaled)")
    p.add_argument("--controller", default="gloo", choices=launcher.CONTROLLERS)
    p.add_argument("--split", default="test", choices=["dev", "test"])
    p.add_argument("--limit", type=int, default=0, help="evaluate only the first N sentences")
    p.add_argument("--work-dir", type=Path, default=Path("runs/hvd_vs_single"))
    p.add_argument("--out", type=Path, default=common.results_path(__file__, "hvd_vs_single.json"))
    p.add_argument("--overwrite", action="store_true")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Train both runs, evaluate them, print and write the comparison."""
    args = build_parser().parse_args(argv)
    if args.np < 2:
        raise SystemExit("--np must be >= 2 (the comparison is N ranks against one process)")
    common.refuse_existing([args.out], args.overwrite)
    runs = run_settings(args)
    data = common.study_config(args.preset, args.set, args.batch_tokens).data
    common.prepare_data(data.data_dir, data.vocab_size)  # the ranks cannot learn the vocabulary
    args.work_dir.mkdir(parents=True, exist_ok=True)
    result = {"preset": args.preset, "steps": args.steps, "np": args.np,
              "effective_batch_tokens": args.np * args.batch_tokens, "split": args.split,
              "limit": args.limit, "scale_lr": args.scale_lr, "runs": {}}
    for name, (ranks, overrides) in runs.items():
        run_dir = args.work_dir / name
        train = [*common.tf_nmt_command(), "train", "--run-dir", str(run_dir),
                 "--preset", args.preset, *common.set_args(overrides)]
        if ranks > 1:
            train = launcher.horovodrun_prefix(ranks, args.controller) + train
        env = launcher.worker_env(threads=max(1, 2 // ranks))
        train_s = run_logged(train, args.work_dir / f"{name}.train.log", env)
        metrics_path = run_dir / f"{args.split}.metrics.json"
        evaluate = [*common.tf_nmt_command(), "evaluate", "--run-dir", str(run_dir),
                    "--split", args.split, "--output-json", str(metrics_path)]
        if args.limit:
            evaluate += ["--limit", str(args.limit)]
        eval_s = run_logged(evaluate, args.work_dir / f"{name}.eval.log",
                            launcher.worker_env(threads=2))
        metrics = json.loads(metrics_path.read_text())
        result["runs"][name] = {"ranks": ranks, "overrides": overrides, "train_command": train,
                                "eval_command": evaluate, "train_s": train_s, "eval_s": eval_s,
                                "bleu": metrics["bleu"], "chrf": metrics.get("chrf"),
                                "signature": metrics.get("signature")}
    single, hvd = result["runs"]["single"], result["runs"][f"hvd{args.np}"]
    result["bleu_difference"] = hvd["bleu"] - single["bleu"]
    print(f"\n{'run':8} {'ranks':>5} {'BLEU':>6} {'chrF':>6} {'train s':>8}")
    for name, r in result["runs"].items():
        chrf = "-" if r["chrf"] is None else f"{r['chrf']:.2f}"
        print(f"{name:8} {r['ranks']:>5} {r['bleu']:>6.2f} {chrf:>6} {r['train_s']:>8.0f}")
    print(f"BLEU hvd{args.np} - single = {result['bleu_difference']:+.2f}")
    common.write_result(args.out, result, overwrite=args.overwrite)
    print(f"wrote {args.out}")
    return 0
