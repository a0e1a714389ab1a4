#!/usr/bin/env python
"""Communication-compression comparison (issue 5): dense allreduce vs gradient dropping (with /
without local gradients, with / without error feedback) vs federated averaging vs BMUF, for the
Transformer and the LSTM, on the real corpus under ``horovodrun -np N``.

Each run is a real ``tf-nmt train`` under horovodrun with the same step and time budget; every
checkpoint (one per ``--eval-every`` steps) is scored with sacreBLEU on the first
``--eval-limit`` test sentences, so the output has BLEU vs step and vs wall time (checkpoint
mtime since the launch). Bytes per step and the density of the summed sparse gradient come from
the run's ``comm_stats.json`` (measured from the exchanged tensors), target words/s from the
progress lines. Writes ``--results`` (JSON) and ``--plot`` (PNG) and prints a table.

Mode ``single`` is the reference of synchronous data parallelism: one process that sees all N
ranks' batches (``data.batch_tokens`` x N) with the learning-rate schedule the N-rank runs use,
so "dense vs single" is Horovod against one process at the same effective batch.

Each finished run leaves ``experiment_run.json`` (its overrides, launch time, wall time and
output) in its run directory; ``--resume`` reuses such runs instead of training them again (a run
trained with other overrides is refused), so an interrupted experiment is restarted with the
same command plus ``--resume``.

Small end-to-end check (minutes)::

    .venv/bin/python scripts/compression_experiment.py --models transformer \\
        --modes dense,graddrop_local --steps 40 --eval-every 20 --average-every 20 \\
        --eval-limit 50 --out-dir runs/compression-tiny --results /tmp/compression-tiny.json \\
        --plot /tmp/compression-tiny.png

The full experiment (hours on 2 cores): the defaults (quickstart / gnmt-small presets,
``--minutes 30`` per run, evaluation every 500 steps).
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import tf_nmt  # noqa: E402,F401  (Keras 2 before TensorFlow)

VARIANTS: Dict[str, List[str]] = {
    "dense": ["train.comm=sparse_as_dense"],
    "graddrop": ["train.comm=graddrop", "train.local_gradients=false", "train.error_feedback=true"],
    "graddrop_noef": ["train.comm=graddrop", "train.local_gradients=false",
                      "train.error_feedback=false"],
    "graddrop_local": ["train.comm=graddrop", "train.local_gradients=true",
                       "train.error_feedback=true"],
    "graddrop_local_noef": ["train.comm=graddrop", "train.local_gradients=true",
                            "train.error_feedback=false"],
    "graddrop_local_1bit": ["train.comm=graddrop", "train.local_gradients=true", "train.one_bit=true"],
    "fedavg": ["train.comm=fedavg"],
    "bmuf": ["train.comm=bmuf"],
    "single": ["train.comm=sparse_as_dense"],  # one process, N ranks' batches: see single_overrides
}
RUN_RECORD = "experiment_run.json"
DEFAULT_MODES = "dense,graddrop,graddrop_noef,graddrop_local,graddrop_local_noef,fedavg,bmuf"
PRESETS = {"transformer": "quickstart", "lstm": "gnmt-small"}
PROGRESS = re.compile(r"step\s+(\d+)/\d+ \| loss ([\d.naif]+) .*?\| ([\d,]+) tgt tok/s")


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", type=Path, default=REPO / "data_cache")
    p.add_argument("--out-dir", type=Path, default=REPO / "runs" / "compression")
    p.add_argument("--results", type=Path, default=REPO / "results" / "compression.json")
    p.add_argument("--plot", type=Path, default=REPO / "results" / "compression.png")
    p.add_argument("--models", default="transformer,lstm")
    p.add_argument("--modes", default=DEFAULT_MODES, help=f"comma list of {', '.join(VARIANTS)}")
    p.add_argument("--np", type=int, default=2, help="ranks (more than the cores oversubscribes)")
    p.add_argument("--controller", default="gloo", choices=["gloo", "mpi"])
    p.add_argument("--steps", type=int, default=100000, help="optimizer steps per run")
    p.add_argument("--minutes", type=float, default=30.0, help="wall-time budget per run (0: none)")
    p.add_argument("--eval-every", type=int, default=500, help="checkpoint/BLEU every N steps")
    p.add_argument("--eval-limit", type=int, default=500, help="test sentences scored per checkpoint")
    p.add_argument("--eval-beam", type=int, default=1)
    p.add_argument("--drop-ratio", type=float, default=0.99)
    p.add_argument("--average-every", type=int, default=500, help="P for fedavg/bmuf/local gradients")
    p.add_argument("--drop-warmup", type=int, default=1000)
    p.add_argument("--bleu-threshold", type=float, default=0.0,
                   help="report time to this BLEU (0: 90%% of the model's best dense BLEU)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="extra config override for every run")
    p.add_argument("--overwrite", action="store_true",
                   help="replace existing run directories and results files")
    p.add_argument("--resume", action="store_true",
                   help="reuse finished runs (their experiment_run.json) with the same overrides")
    args = p.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    args.modes = [m for m in args.modes.split(",") if m]
    for m in args.models:
        if m not in PRESETS:
            p.error(f"unknown model {m!r} (use {', '.join(PRESETS)})")
    for m in args.modes:
        if m not in VARIANTS:
            p.error(f"unknown mode {m!r} (use {', '.join(VARIANTS)})")
    if args.overwrite and args.resume:
        p.error("--overwrite and --resume exclude each other")
    if args.eval_every % args.average_every and args.average_every % args.eval_every:
        p.error("--eval-every and --average-every must divide one another, so that evaluated "
                "checkpoints of the averaging modes hold averaged parameters")
    for path in (args.results, args.plot):
        if path.exists() and not args.overwrite:
            p.error(f"{path} exists; pass --overwrite to replace it")
    return args


def single_overrides(args: argparse.Namespace, model: str) -> List[str]:
    """One process doing what ``args.np`` ranks do together: their summed batch and the learning
    rate and warm-up that the trainer's worker rule gives them."""
    from tf_nmt.config import load_config, preset
    from tf_nmt.distributed.scaling import scale_lr, scale_warmup

    t = load_config(None, list(args.set), base=preset(PRESETS[model]))
    n = args.np if t.train.scale_lr_with_workers else 1
    return [f"data.batch_tokens={t.data.batch_tokens * args.np}",
            f"train.peak_lr={scale_lr(t.train.peak_lr, n)}",
            f"train.warmup_steps={scale_warmup(t.train.warmup_steps, n)}",
            "train.scale_lr_with_workers=false"]


def run_overrides(args: argparse.Namespace, model: str, mode: str) -> List[str]:
    """The ``--set`` items of one run (later items win)."""
    overrides = VARIANTS[mode] + [
        f"train.train_steps={args.steps}", f"train.steps_per_cycle={args.eval_every}",
        f"train.time_budget_minutes={args.minutes}", "train.keep_checkpoints=100000",
        f"train.drop_ratio={args.drop_ratio}", f"train.average_every={args.average_every}",
        f"train.drop_warmup_steps={args.drop_warmup}", f"train.log_every={max(1, min(50, args.eval_every))}",
        *args.set]
    return overrides + (single_overrides(args, model) if mode == "single" else [])


def train_run(args: argparse.Namespace, model: str, mode: str, run_dir: Path) -> Dict[str, Any]:
    """One ``tf-nmt train`` under horovodrun (``single``: one rank with all the cores); returns
    its overrides, launch time, wall time and stdout, also saved as the run's record."""
    from tf_nmt.distributed import launcher
    from tf_nmt.training.trainer import write_json_atomic

    overrides = run_overrides(args, model, mode)
    record_path = run_dir / RUN_RECORD
    if args.resume and record_path.is_file():
        record = json.loads(record_path.read_text())
        if record.get("overrides") != overrides:
            raise SystemExit(f"{run_dir} was trained with other settings ({record.get('overrides')}); "
                             f"pass --overwrite to retrain it")
        print(f"  reusing the finished run in {run_dir}", flush=True)
        return record
    if run_dir.exists():
        if not args.overwrite:
            raise SystemExit(f"{run_dir} exists (unfinished, or not asked to --resume); "
                             f"pass --overwrite to retrain it")
        shutil.rmtree(run_dir)
    cli = [str(Path(sys.executable).parent / "tf-nmt"), "train", "--run-dir", str(run_dir),
           "--preset", PRESETS[model], "--data-dir", str(args.data_dir)]
    for item in overrides:
        cli += ["--set", item]
    ranks, threads = (1, args.np) if mode == "single" else (args.np, 1)
    start = time.time()
    out = launcher.run(Path(cli[0]), cli[1:], np=ranks, controller=args.controller, threads=threads,
                       timeout=max(600.0, args.minutes * 60 * 3 + 900))
    record = {"overrides": overrides, "ranks": ranks, "launched": start,
              "wall_seconds": time.time() - start, "stdout": out}
    write_json_atomic(record_path, record)
    return record


def progress(stdout: str) -> List[Dict[str, float]]:
    rows = []
    for m in PROGRESS.finditer(stdout):
        rows.append({"step": int(m.group(1)), "loss": float(m.group(2)),
                     "tokens_per_s": float(m.group(3).replace(",", ""))})
    return rows


def evaluate_checkpoints(args: argparse.Namespace, run_dir: Path, launched: float) -> List[Dict]:
    from tf_nmt.evaluation.evaluate import evaluate_run
    from tf_nmt.training.checkpoints import list_checkpoints

    curve = []
    for prefix in list_checkpoints(run_dir / "checkpoints"):
        step = int(prefix.rsplit("-", 1)[1])
        seconds = Path(prefix + ".index").stat().st_mtime - launched
        report = evaluate_run(run_dir, split="test", checkpoint=prefix, data_dir=args.data_dir,
                              beam_size=args.eval_beam, limit=args.eval_limit, log=lambda _m: None)
        curve.append({"step": step, "seconds": seconds, "bleu": report["bleu"],
                      "chrf": report["chrf"]})
        print(f"  step {step:>6} ({seconds:7.1f} s): BLEU {report['bleu']:.2f}", flush=True)
    return curve


def summarise(model: str, mode: str, run: Dict[str, Any], curve: List[Dict],
              stats: Dict[str, Any], warmup: int) -> Dict[str, Any]:
    rows = progress(run["stdout"])
    steady = [e["sent_bytes"] for e in stats.get("per_step", []) if e["step"] > warmup]
    rates = [r["tokens_per_s"] for r in rows[1:]] or [r["tokens_per_s"] for r in rows]
    final = curve[-1] if curve else {}
    return {"model": model, "mode": mode, "ranks": run.get("ranks"),
            "overrides": run.get("overrides", VARIANTS[mode]),
            "final_step": final.get("step"), "final_bleu": final.get("bleu"),
            "best_bleu": max((c["bleu"] for c in curve), default=None),
            "tgt_words_per_s": sum(rates) / len(rates) if rates else None,
            "bytes_per_step": stats.get("sent_bytes_per_step"),
            "dense_bytes_per_step": stats.get("dense_bytes_per_step"),
            "reduction_vs_dense": stats.get("reduction"),
            "bytes_per_step_after_drop_warmup": sum(steady) / len(steady) if steady else None,
            "mean_density": stats.get("mean_density"),
            "mean_kept_fraction": stats.get("mean_kept_fraction"),
            "wall_seconds": run["wall_seconds"], "curve": curve,
            "loss": [{"step": r["step"], "loss": r["loss"]} for r in rows]}


def time_to_threshold(results: List[Dict[str, Any]], fixed: float) -> None:
    for model in {r["model"] for r in results}:
        runs = [r for r in results if r["model"] == model]
        dense = [r["best_bleu"] for r in runs if r["mode"] == "dense" and r["best_bleu"] is not None]
        threshold = fixed or (0.9 * max(dense) if dense else 0.0)
        for r in runs:
            hit = next((c for c in r["curve"] if c["bleu"] >= threshold), None) if threshold else None
            r["bleu_threshold"] = threshold
            r["seconds_to_threshold"] = hit["seconds"] if hit else None
            r["steps_to_threshold"] = hit["step"] if hit else None


def against_single(results: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """BLEU of each N-rank run minus the one-process reference's, checkpoint by checkpoint at the
    steps both evaluated (the Horovod-vs-one-process comparison at equal effective batch)."""
    rows = []
    for ref in (r for r in results if r["mode"] == "single"):
        by_step = {c["step"]: c["bleu"] for c in ref["curve"]}
        for r in results:
            if r["model"] != ref["model"] or r is ref:
                continue
            shared = [c for c in r["curve"] if c["step"] in by_step]
            rows.append({"model": r["model"], "mode": r["mode"],
                         "bleu_minus_single": {c["step"]: round(c["bleu"] - by_step[c["step"]], 2)
                                               for c in shared}})
    return rows


def plot(results: List[Dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted({r["model"] for r in results})
    fig, axes = plt.subplots(len(models), 2, figsize=(11, 4 * len(models)), squeeze=False)
    for row, model in zip(axes, models):
        for r in (r for r in results if r["model"] == model):
            steps = [c["step"] for c in r["curve"]]
            row[0].plot(steps, [c["bleu"] for c in r["curve"]], marker="o", label=r["mode"])
            row[1].plot([c["seconds"] / 60 for c in r["curve"]], [c["bleu"] for c in r["curve"]],
                        marker="o", label=r["mode"])
        row[0].set(title=f"{model}: BLEU vs step", xlabel="optimizer step", ylabel="test BLEU")
        row[1].set(title=f"{model}: BLEU vs time", xlabel="wall time (min)", ylabel="test BLEU")
        row[0].legend(fontsize=8)
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(tmp, dpi=110)
    tmp.replace(path)


def table(results: List[Dict[str, Any]]) -> str:
    head = (f"{'model':<12}{'mode':<22}{'steps':>7}{'BLEU':>7}{'words/s':>10}{'bytes/step':>13}"
            f"{'vs dense':>10}{'density':>9}{'t→thr (s)':>11}")
    lines = [head, "-" * len(head)]
    for r in results:
        def f(v, fmt):
            return format(v, fmt) if isinstance(v, (int, float)) else "-"
        lines.append(f"{r['model']:<12}{r['mode']:<22}{f(r['final_step'], 'd'):>7}"
                     f"{f(r['final_bleu'], '.2f'):>7}{f(r['tgt_words_per_s'], ',.0f'):>10}"
                     f"{f(r['bytes_per_step'], ',.0f'):>13}{f(r['reduction_vs_dense'], '.1f'):>9}x"
                     f"{f(r['mean_density'], '.4f'):>9}{f(r.get('seconds_to_threshold'), '.0f'):>11}")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    from tf_nmt.training.trainer import write_json_atomic

    results = []
    for model in args.models:
        for mode in args.modes:
            run_dir = args.out_dir / f"{model}-{mode}"
            where = "1 process with all ranks' batches" if mode == "single" else f"{args.np} ranks"
            print(f"== {model} / {mode}: training on {where} -> {run_dir}", flush=True)
            run = train_run(args, model, mode, run_dir)
            stats_path = run_dir / "comm_stats.json"  # one process exchanges nothing: no bytes
            stats = json.loads(stats_path.read_text()) if mode != "single" and stats_path.is_file() else {}
            evaluation = {"eval_limit": args.eval_limit, "eval_beam": args.eval_beam}
            if run.get("evaluation") == evaluation and "curve" in run:
                curve = run["curve"]
            else:
                curve = evaluate_checkpoints(args, run_dir, run["launched"])
                write_json_atomic(run_dir / RUN_RECORD, {**run, "evaluation": evaluation, "curve": curve})
            results.append(summarise(model, mode, run, curve, stats, args.drop_warmup))
    time_to_threshold(results, args.bleu_threshold)
    payload = {"setting": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
               "note": "BLEU on the first eval_limit test sentences, beam eval_beam; bytes are what "
                       "each rank hands to the collectives per step (parameter averages amortised); "
                       "'single' is one process with all ranks' batches and their LR schedule",
               "runs": results, "against_single": against_single(results)}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.results, payload)
    plot(results, args.plot)
    print(table(results))
    for row in payload["against_single"]:
        print(f"{row['model']} {row['mode']} BLEU minus single, by step: {row['bleu_minus_single']}")
    print(f"wrote {args.results} and {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
