"""Communication-compression comparison: the comm modes (sparse_as_dense allreduce, dense
allreduce with allgathered embedding gradients, gradient dropping with / without local
gradients and error feedback, federated averaging, BMUF) for the Transformer and GNMT, on the
real corpus under ``horovodrun -np N``.

Each run is a real ``tf-nmt train`` under horovodrun with the same step and time budget; every
checkpoint (one per ``--eval-every`` steps) is scored with sacreBLEU on the first
``--eval-limit`` test sentences (:func:`experiments.lib.curves.bleu_curve`), so the output has
BLEU vs step and vs wall time (checkpoint mtime since the launch). Bytes per step and the density
of the summed sparse gradient come from the run's ``comm_stats.json`` (measured from the
exchanged tensors), loss and target tokens/s from its ``progress.jsonl``. Writes ``--results``
(JSON) and ``--plot`` (PNG) and prints a table.

Variant ``single`` is the reference of synchronous data parallelism: one process that sees all N
ranks' batches (``data.batch_tokens`` x N) with the learning-rate schedule the N-rank runs use,
so "sparse_as_dense vs single" is Horovod against one process at the same effective batch.

Each finished run leaves ``experiment_run.json`` (its overrides, launch time, wall time and
output) in its run directory; ``--resume`` reuses such runs instead of training them again (a run
trained with other overrides is refused) and continues a run that was interrupted from its last
checkpoint, so an interrupted experiment is restarted with the same command plus ``--resume``. Runs and results of the earlier naming (variant ``dense`` for
sparse_as_dense, model ``lstm`` for gnmt) are read and translated.

A grid is spread over several invocations (and sessions) with ``--update``: the results file
keeps the runs this invocation does not measure, and ``--merge FILE`` folds in the runs of
another results file of this study. Every run carries the command, settings and machine that
measured it, so one file holds the whole grid.

Small end-to-end check (minutes)::

    python -m experiments compression --models transformer --modes sparse_as_dense,graddrop_local \\
        --steps 40 --eval-every 20 --average-every 20 --eval-limit 50 \\
        --out-dir runs/compression-tiny --results /tmp/compression-tiny.json \\
        --plot /tmp/compression-tiny.png

The full experiment (hours on 2 cores): the defaults (quickstart / gnmt-small presets,
``--minutes 30`` per run, evaluation every 500 steps).
"""
from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tf_nmt.config import load_config, preset
from experiments.lib import launcher
from tf_nmt.distributed.comm.settings import MODE_KEYS, keys_used
from experiments.lib import common
from experiments.lib.curves import bleu_curve, first_reaching
from experiments.lib.plotting import save_figure, subplots
from tf_nmt.training.callbacks import PROGRESS_LOG, read_progress_log
from tf_nmt.training.schedules import worker_scaled
from tf_nmt.utils import machine
from tf_nmt.utils.io import write_json_atomic

BASELINE = "sparse_as_dense"  # the variant the others are compared with
VARIANTS: Dict[str, List[str]] = {
    "sparse_as_dense": ["train.comm=sparse_as_dense"],
    "dense": ["train.comm=dense"],
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
SYNC_MODES = ("fedavg", "bmuf")  # average models every --sync-every steps
# The options that set a key only some modes read: argparse dest -> (flag, default).
MODE_OPTIONS: Dict[str, Tuple[str, Any]] = {
    "drop_ratio": ("--drop-ratio", 0.99), "drop_warmup": ("--drop-warmup", 1000),
    "average_every": ("--average-every", 500), "sync_every": ("--sync-every", 0)}
RUN_RECORD = "experiment_run.json"
# What each run of a results file carries about the invocation that measured it (older files
# have them once, at the top, for all their runs).
RUN_PROVENANCE = ("command", "setting", "machine")
# The thesis's Table 5.1/5.2 (dev BLEU, as issue 14 quotes them): the Transformer does not train
# with plain gradient dropping or federated averaging, local gradients restore it; the deep RNN
# trains in every mode. Modes the thesis did not report are absent.
THESIS_BLEU: Dict[str, Dict[str, float]] = {
    "transformer": {BASELINE: 35.39, "graddrop": 0.0, "fedavg": 0.0, "graddrop_local": 35.07},
    "gnmt": {BASELINE: 34.45, "graddrop": 34.38, "fedavg": 34.33, "graddrop_local": 34.52},
}
DEFAULT_MODES = ("sparse_as_dense,graddrop,graddrop_noef,graddrop_local,graddrop_local_noef,"
                 "fedavg,bmuf")
PRESETS = {"transformer": "quickstart", "gnmt": "gnmt-small"}
LEGACY_MODELS = {"lstm": "gnmt"}  # earlier model name -> model kind


def legacy_mode(mode: str, overrides: Sequence[str]) -> str:
    """The current name of a variant recorded as ``mode`` with ``overrides``: the earlier
    ``dense`` variant was ``train.comm=sparse_as_dense`` (now ``dense`` is the package's
    allgathering mode, told apart by its overrides)."""
    if mode == "dense" and "train.comm=sparse_as_dense" in overrides:
        return BASELINE
    return mode


def translate_run(run: Dict[str, Any]) -> Dict[str, Any]:
    """A run summary of any naming with the current model and variant names."""
    return {**run, "model": LEGACY_MODELS.get(run["model"], run["model"]),
            "mode": legacy_mode(run["mode"], run.get("overrides", []))}


def translate_results(payload: Dict[str, Any]) -> Dict[str, Any]:
    """A results payload of any naming with the current names (runs, comparisons, settings)."""
    renamed = {r["mode"]: legacy_mode(r["mode"], r.get("overrides", []))
               for r in payload.get("runs", [])}
    setting = dict(payload.get("setting", {}))
    if "models" in setting:
        setting["models"] = [LEGACY_MODELS.get(m, m) for m in setting["models"]]
    if "modes" in setting:
        setting["modes"] = [renamed.get(m, m) for m in setting["modes"]]
    against = [{**row, "model": LEGACY_MODELS.get(row["model"], row["model"]),
                "mode": renamed.get(row["mode"], row["mode"])}
               for row in payload.get("against_single", [])]
    return {**payload, "setting": setting, "runs": [translate_run(r) for r in payload.get("runs", [])],
            "against_single": against}


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The study's command line, checked (also ``python -m experiments compression``)."""
    p = argparse.ArgumentParser(prog="python -m experiments compression",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", type=Path, default=Path("data_cache"))
    p.add_argument("--out-dir", type=Path, default=Path("runs/compression"))
    p.add_argument("--results", type=Path, default=common.results_path(__file__, "compression.json"))
    p.add_argument("--plot", type=Path, default=common.results_path(__file__, "compression.png"))
    p.add_argument("--models", default="transformer,gnmt", help=f"comma list of {', '.join(PRESETS)}")
    p.add_argument("--modes", default=DEFAULT_MODES, help=f"comma list of {', '.join(VARIANTS)}")
    p.add_argument("--np", type=int, default=2, help="ranks (more than the cores oversubscribes)")
    p.add_argument("--threads", type=int, default=1,
                   help="TensorFlow threads per rank (1 on a 2-core machine; a bigger node can "
                        "give each rank more); `single` gets --np times as many")
    p.add_argument("--controller", default="gloo", choices=launcher.CONTROLLERS)
    p.add_argument("--steps", default="100000",
                   help="optimizer steps per run: N for every model, or MODEL=N,... per model "
                        "(the LSTM learns more slowly per step than the Transformer)")
    p.add_argument("--minutes", type=float, default=30.0, help="wall-time budget per run (0: none)")
    p.add_argument("--eval-every", type=int, default=500, help="checkpoint/BLEU every N steps")
    p.add_argument("--eval-limit", type=int, default=500, help="test sentences scored per checkpoint")
    p.add_argument("--eval-beam", type=int, default=1)
    # Mode-specific options default to None, so that one given to no listed mode that reads it
    # is refused (see MODE_OPTIONS) instead of being silently ignored.
    p.add_argument("--drop-ratio", type=float, help="graddrop modes (default 0.99)")
    p.add_argument("--average-every", type=int,
                   help="P for the parameter averages of graddrop with local gradients (default 500)")
    p.add_argument("--sync-every", type=int,
                   help="P for fedavg and bmuf, the model-averaging modes (0, the default: "
                        "--average-every; the thesis's fedavg averaged every 20 steps)")
    p.add_argument("--drop-warmup", type=int, help="graddrop modes (default 1000)")
    p.add_argument("--bleu-threshold", type=float, default=0.0,
                   help=f"report time to this BLEU (0: 90%% of the model's best {BASELINE} BLEU)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="extra config override for every run")
    p.add_argument("--overwrite", action="store_true",
                   help="replace existing run directories and results files")
    p.add_argument("--resume", action="store_true",
                   help="reuse finished runs (their experiment_run.json) with the same overrides")
    p.add_argument("--update", action="store_true",
                   help="grow the existing --results file: keep its runs of the (model, mode) "
                        "pairs this invocation does not measure")
    p.add_argument("--merge", type=Path, action="append", default=[], metavar="RESULTS",
                   help="with --update: also keep the runs of another results file of this "
                        "study (repeatable; a (model, mode) pair in two files is refused)")
    args = p.parse_args(argv)
    args.argv = list(argv) if argv is not None else None  # for the results' command line
    args.models = [m for m in args.models.split(",") if m]
    args.modes = [m for m in args.modes.split(",") if m]
    try:
        args.steps = parse_steps(args.steps, args.models)
    except ValueError as err:
        p.error(f"--steps: {err}")
    for m in args.models:
        if m not in PRESETS:
            hint = f" (now {LEGACY_MODELS[m]!r})" if m in LEGACY_MODELS else ""
            p.error(f"unknown model {m!r}{hint} (use {', '.join(PRESETS)})")
    for m in args.modes:
        if m not in VARIANTS:
            p.error(f"unknown mode {m!r} (use {', '.join(VARIANTS)})")
    if args.overwrite and args.resume:
        p.error("--overwrite and --resume exclude each other")
    if args.threads < 1 or args.np < 1:
        p.error("--np and --threads must be at least 1")
    if args.update and args.overwrite:
        p.error("--update keeps the runs of --results, --overwrite replaces it: give one")
    if args.merge and not args.update:
        p.error("--merge adds runs to the existing --results: give --update too")
    for path in ([args.results] if args.update else []) + args.merge:
        if not path.is_file():
            p.error(f"{path} does not exist (--update and --merge read it)")
    read = {dest for mode in args.modes for dest in options_read(mode)}
    if "sync_every" in read and not args.sync_every:  # fedavg/bmuf fall back on --average-every
        read.add("average_every")
    for dest, (flag, default) in MODE_OPTIONS.items():
        if getattr(args, dest) is None:
            setattr(args, dest, default)
        elif dest not in read:
            p.error(f"{flag} is read by none of the modes {','.join(args.modes)}; remove it or "
                    f"add a mode that uses it")
    if args.sync_every < 0:
        p.error("--sync-every must be >= 0")
    args.sync_every = args.sync_every or args.average_every
    for dest in ("average_every", "sync_every"):
        name, period = MODE_OPTIONS[dest][0], getattr(args, dest)
        if dest not in read:
            continue
        if args.eval_every % period and period % args.eval_every:
            p.error(f"--eval-every and {name} must divide one another, so that evaluated "
                    f"checkpoints of the averaging modes hold averaged parameters")
    for path in (args.results, args.plot):  # --resume / --update rewrite them with the grown grid
        if path.exists() and not (args.overwrite or args.resume or args.update):
            p.error(f"{path} exists; pass --overwrite to replace it (or --resume / --update to "
                    f"grow it)")
    return args


def options_read(mode: str) -> Tuple[str, ...]:
    """The mode-specific options (``MODE_OPTIONS`` dests) whose config key ``mode``'s runs read."""
    train = load_config(None, VARIANTS[mode]).train
    used = keys_used(train.comm, train.local_gradients)
    read = [dest for dest, key in (("drop_ratio", "drop_ratio"),
                                   ("drop_warmup", "drop_warmup_steps")) if key in used]
    if "average_every" in used:
        read.append("sync_every" if mode in SYNC_MODES else "average_every")
    return tuple(read)


def parse_steps(text: str, models: Sequence[str]) -> Dict[str, int]:
    """``--steps``: one count for every model (``2000``) or one per model
    (``transformer=2000,gnmt=4000``, every model of the run given)."""
    if "=" not in text:
        steps = {m: int(text) for m in models}
    else:
        steps = {}
        for item in text.split(","):
            model, _, count = item.partition("=")
            if model not in PRESETS:
                raise ValueError(f"unknown model {model!r} (use {', '.join(PRESETS)})")
            steps[model] = int(count)
        missing = [m for m in models if m not in steps]
        if missing:
            raise ValueError(f"no step count for {', '.join(missing)}")
    if any(n < 1 for n in steps.values()):
        raise ValueError(f"step counts must be >= 1, got {steps}")
    return steps


def single_overrides(args: argparse.Namespace, model: str) -> List[str]:
    """One process doing what ``args.np`` ranks do together: their summed batch and the learning
    rate and warm-up that the trainer's worker rule gives them."""
    cfg = load_config(None, list(args.set), base=preset(PRESETS[model]))
    peak_lr, warmup = worker_scaled(cfg.train, args.np)
    return [f"data.batch_tokens={cfg.data.batch_tokens * args.np}", f"train.peak_lr={peak_lr}",
            f"train.warmup_steps={warmup}", "train.scale_lr_with_workers=false"]


def run_overrides(args: argparse.Namespace, model: str, mode: str) -> List[str]:
    """The ``--set`` items of one run (later items win)."""
    overrides = VARIANTS[mode] + [
        f"train.train_steps={args.steps[model]}", f"train.steps_per_cycle={args.eval_every}",
        f"train.time_budget_minutes={args.minutes}", "train.keep_checkpoints=100000",
        f"train.drop_ratio={args.drop_ratio}",
        f"train.average_every={args.sync_every if mode in SYNC_MODES else args.average_every}",
        f"train.drop_warmup_steps={args.drop_warmup}", f"train.log_every={max(1, min(50, args.eval_every))}",
        *args.set]
    train = load_config(None, VARIANTS[mode]).train  # a mode refuses the keys it would ignore
    ignored = set(MODE_KEYS) - set(keys_used(train.comm, train.local_gradients))
    overrides = [o for o in overrides if o.split("=", 1)[0][len("train."):] not in ignored]
    return overrides + (single_overrides(args, model) if mode == "single" else [])


def run_dirs(out_dir: Path, model: str, mode: str) -> List[Path]:
    """Where the run of (model, mode) lives: its directory, then those of the earlier naming."""
    models = [model] + [old for old, new in LEGACY_MODELS.items() if new == model]
    modes = [mode] + (["dense"] if mode == BASELINE else [])
    return [Path(out_dir) / f"{m}-{v}" for m in models for v in modes]


def finished_run(args: argparse.Namespace, model: str, mode: str) -> Optional[Path]:
    """With ``--resume``: the directory of a finished run of (model, mode), in either naming,
    trained with this invocation's overrides (None when there is none; refused when the run
    in the current directory has other overrides)."""
    overrides = run_overrides(args, model, mode)
    for i, run_dir in enumerate(run_dirs(args.out_dir, model, mode)):
        record_path = run_dir / RUN_RECORD
        if not record_path.is_file():
            continue
        recorded = json.loads(record_path.read_text()).get("overrides")
        if recorded == overrides:
            return run_dir
        if i == 0:
            raise SystemExit(f"{run_dir} was trained with other settings ({recorded}); "
                             f"pass --overwrite to retrain it")
    return None


def train_run(args: argparse.Namespace, model: str, mode: str, run_dir: Path) -> Dict[str, Any]:
    """One ``tf-nmt train`` under horovodrun (``single``: one rank with all the cores); returns
    its overrides, launch time, wall time and stdout, also saved as the run's record.

    With ``--resume`` a run that was interrupted (its directory has no record) is continued
    from its last checkpoint: ``tf-nmt train`` resumes every rank exactly. Its wall time is then
    unknown, so the record says ``interrupted`` and holds no launch or wall time."""
    overrides = run_overrides(args, model, mode)
    interrupted = False
    if args.resume:
        found = finished_run(args, model, mode)
        if found is not None:
            print(f"  reusing the finished run in {found}", flush=True)
            return {**json.loads((found / RUN_RECORD).read_text()), "run_dir": str(found)}
    if run_dir.exists():
        if args.resume:
            interrupted = True
            print(f"  continuing the interrupted run in {run_dir} from its last checkpoint",
                  flush=True)
        elif not args.overwrite:
            raise SystemExit(f"{run_dir} exists (unfinished, or not asked to --resume); "
                             f"pass --overwrite to retrain it or --resume to continue it")
        else:
            shutil.rmtree(run_dir)
    common.prepare_data(args.data_dir, load_config(None, overrides, base=preset(PRESETS[model]))
                        .data.vocab_size)
    cli = ["train", "--run-dir", str(run_dir), "--preset", PRESETS[model],
           "--data-dir", str(args.data_dir), *common.set_args(overrides)]
    ranks, threads = (1, args.np * args.threads) if mode == "single" else (args.np, args.threads)
    start = time.time()
    out = launcher.run(common.tf_nmt_executable(), cli, np=ranks, controller=args.controller,
                       threads=threads,
                       timeout=max(600.0, args.minutes * 60 * 3 + 900) if args.minutes else None)
    record = {"overrides": overrides, "ranks": ranks,
              "launched": None if interrupted else start,
              "wall_seconds": None if interrupted else time.time() - start,
              "interrupted": interrupted, "stdout": out}
    write_json_atomic(run_dir / RUN_RECORD, record)
    return {**record, "run_dir": str(run_dir)}


def summarise(model: str, mode: str, run: Dict[str, Any], curve: List[Dict],
              stats: Dict[str, Any], warmup: int, progress: List[Dict[str, Any]]) -> Dict[str, Any]:
    """One run's row: BLEU, throughput (from the progress log), bytes and density (from
    ``comm_stats.json``, steps after the drop warm-up separately), loss curve."""
    steady = [e["sent_bytes"] for e in stats.get("per_step", []) if e["step"] > warmup]
    rates = [r["tokens_per_s"] for r in progress[1:]] or [r["tokens_per_s"] for r in progress]
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
            "kept_fraction_by_tensor": kept_by_tensor(stats),
            "wall_seconds": run["wall_seconds"], "interrupted": run.get("interrupted", False),
            "curve": curve,
            "loss": [{"step": r["step"], "loss": r["loss"]} for r in progress]}


def kept_by_tensor(stats: Dict[str, Any]) -> Optional[Dict[str, float]]:
    """GradDrop runs: each tensor's mean kept fraction after the drop warm-up (rank 0's), from
    ``comm_stats.json``; a tensor far below the run's mean is starved by a global threshold."""
    per_tensor = stats.get("per_tensor")
    if not per_tensor:
        return None
    return {r["name"]: r["mean_kept_fraction_after_warmup"] for r in per_tensor["tensors"]}


def time_to_threshold(results: List[Dict[str, Any]], fixed: float) -> None:
    """Add the BLEU threshold and the seconds/steps each run took to reach it (in place);
    without ``fixed`` the threshold is 90% of the model's best baseline BLEU."""
    for model in {r["model"] for r in results}:
        runs = [r for r in results if r["model"] == model]
        base = [r["best_bleu"] for r in runs if r["mode"] == BASELINE and r["best_bleu"] is not None]
        threshold = fixed or (0.9 * max(base) if base else 0.0)
        for r in runs:
            hit = first_reaching(r["curve"], threshold) if threshold else None
            r["bleu_threshold"] = threshold
            r["seconds_to_threshold"] = hit.get("seconds") if hit else None
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


def against_thesis(results: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Table 5.1/5.2 in the thesis's shape: each run's final BLEU and its difference from this
    grid's baseline, beside the thesis's BLEU and difference (None where it has no figure)."""
    rows = []
    for r in results:
        base = next((b["final_bleu"] for b in results
                     if b["model"] == r["model"] and b["mode"] == BASELINE), None)
        thesis = THESIS_BLEU.get(r["model"], {})
        ours, theirs = r["final_bleu"], thesis.get(r["mode"])
        rows.append({"model": r["model"], "mode": r["mode"], "final_step": r["final_step"],
                     "bleu": ours,
                     "bleu_minus_baseline": (round(ours - base, 2)
                                             if ours is not None and base is not None else None),
                     "thesis_bleu": theirs,
                     "thesis_minus_baseline": (round(theirs - thesis[BASELINE], 2)
                                               if theirs is not None else None)})
    return rows


def plot(results: List[Dict[str, Any]], path: Path) -> None:
    """BLEU vs step (left) and vs wall time (right), one row per model."""
    models = sorted({r["model"] for r in results})
    colours = mode_colours(results)
    fig, axes = subplots(len(models), 2, figsize=(11, 4 * len(models)))
    for row, model in zip(axes, models):
        for r in (r for r in results if r["model"] == model):
            steps = [c["step"] for c in r["curve"]]
            style = dict(marker="o", label=r["mode"], color=colours[r["mode"]])
            row[0].plot(steps, [c["bleu"] for c in r["curve"]], **style)
            if all("seconds" in c for c in r["curve"]):  # an interrupted run has no wall time
                row[1].plot([c["seconds"] / 60 for c in r["curve"]],
                            [c["bleu"] for c in r["curve"]], **style)
        row[0].set(title=f"{model}: BLEU vs step", xlabel="optimizer step", ylabel="test BLEU")
        row[1].set(title=f"{model}: BLEU vs time", xlabel="wall time (min)", ylabel="test BLEU")
        row[0].legend(fontsize=8)
        if row[1].lines:
            row[1].legend(fontsize=8)
    save_figure(fig, path)


def mode_colours(results: List[Dict[str, Any]]) -> Dict[str, str]:
    """One colour per mode, the same in every panel and model (matplotlib's cycle, in the
    order the modes first appear): the time panel skips runs without wall times, so colours
    assigned by plotting order would name other modes there."""
    modes = list(dict.fromkeys(r["mode"] for r in results))
    cycle = [f"C{i % 10}" for i in range(len(modes))]
    return dict(zip(modes, cycle))


def _cell(value: Any, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, (int, float)) else "-"


def table(results: List[Dict[str, Any]]) -> str:
    """The summary table, one line per run."""
    head = (f"{'model':<12}{'mode':<22}{'steps':>7}{'BLEU':>7}{'words/s':>10}{'bytes/step':>13}"
            f"{'vs dense':>10}{'density':>9}{'t→thr (s)':>11}")
    lines = [head, "-" * len(head)]
    for r in results:
        lines.append(f"{r['model']:<12}{r['mode']:<22}{_cell(r['final_step'], 'd'):>7}"
                     f"{_cell(r['final_bleu'], '.2f'):>7}{_cell(r['tgt_words_per_s'], ',.0f'):>10}"
                     f"{_cell(r['bytes_per_step'], ',.0f'):>13}"
                     f"{_cell(r['reduction_vs_dense'], '.1f'):>9}x"
                     f"{_cell(r['mean_density'], '.4f'):>9}"
                     f"{_cell(r.get('seconds_to_threshold'), '.0f'):>11}")
    return "\n".join(lines)


def measure(args: argparse.Namespace, model: str, mode: str) -> Dict[str, Any]:
    """Train (or reuse) one run, score its checkpoints and summarise it."""
    run_dir = args.out_dir / f"{model}-{mode}"
    where = "1 process with all ranks' batches" if mode == "single" else f"{args.np} ranks"
    print(f"== {model} / {mode}: training on {where} -> {run_dir}", flush=True)
    run = train_run(args, model, mode, run_dir)
    run_dir = Path(run.pop("run_dir"))
    stats_path = run_dir / "comm_stats.json"  # one process exchanges nothing: no bytes
    stats = json.loads(stats_path.read_text()) if mode != "single" and stats_path.is_file() else {}
    evaluation = {"eval_limit": args.eval_limit, "eval_beam": args.eval_beam}
    if run.get("evaluation") == evaluation and "curve" in run:
        curve = run["curve"]
    else:
        curve = bleu_curve(run_dir, "test", data_dir=args.data_dir, limit=args.eval_limit,
                           beam_size=args.eval_beam, launched=run["launched"])
        write_json_atomic(run_dir / RUN_RECORD, {**run, "evaluation": evaluation, "curve": curve})
    progress = read_progress_log(run_dir / PROGRESS_LOG)
    return summarise(model, mode, run, curve, stats, args.drop_warmup, progress)


def kept_runs(args: argparse.Namespace) -> List[Dict[str, Any]]:
    """With ``--update``: the runs of ``--results`` and of every ``--merge`` file (current
    names), each with its own command, settings and machine (an older file's top-level ones
    copied in); otherwise none. SystemExit when a (model, mode) pair is in two files."""
    if not args.update:
        return []
    runs: Dict[Tuple[str, str], Tuple[Path, Dict[str, Any]]] = {}
    for path in [args.results, *args.merge]:
        payload = translate_results(json.loads(Path(path).read_text()))
        shared = {k: payload[k] for k in RUN_PROVENANCE if k in payload}
        for run in payload.get("runs", []):
            key = (run["model"], run["mode"])
            if key in runs:
                raise SystemExit(f"--merge: {key[0]} / {key[1]} is in both {runs[key][0]} "
                                 f"and {path}; keep one")
            runs[key] = (Path(path), {**shared, **run})
    return [run for _, run in runs.values()]


def provenance(args: argparse.Namespace) -> Dict[str, Any]:
    """What a run measured by this invocation carries about it (see ``RUN_PROVENANCE``)."""
    return {"command": common.command_line("compression", args.argv),
            "setting": invocation_setting(args), "machine": machine.describe()}


def invocation_setting(args: argparse.Namespace) -> Dict[str, Any]:
    """The invocation's options, as JSON (paths as strings)."""
    def plain(value: Any) -> Any:
        if isinstance(value, Path):
            return str(value)
        return [plain(v) for v in value] if isinstance(value, list) else value
    return {k: plain(v) for k, v in vars(args).items() if k != "argv"}


def grown(kept: List[Dict[str, Any]], measured: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The kept runs, a re-measured (model, mode) replaced in place, then the new ones."""
    new = {(r["model"], r["mode"]): r for r in measured}
    runs = [new.pop((r["model"], r["mode"]), r) for r in kept]
    return runs + list(new.values())


def write_outputs(args: argparse.Namespace, results: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Write the results file and plot of the runs measured so far; returns the payload."""
    time_to_threshold(results, args.bleu_threshold)
    payload = {"command": common.command_line("compression", args.argv),
               "setting": invocation_setting(args),
               "note": "BLEU on the first eval_limit test sentences, beam eval_beam; bytes are what "
                       "each rank hands to the collectives per step (parameter averages amortised); "
                       "'single' is one process with all ranks' batches and their LR schedule",
               "runs": results, "against_single": against_single(results),
               "against_thesis": against_thesis(results)}
    common.write_result(args.results, payload, overwrite=True)
    plot(results, args.plot)
    return payload


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run every (model, mode) of the command line; write the results, plot and table."""
    args = parse_args(argv)
    kept = kept_runs(args)
    record = provenance(args)
    measured: List[Dict[str, Any]] = []
    results = grown(kept, measured)
    payload: Dict[str, Any] = {"against_single": [], "against_thesis": []}
    if kept and not (args.models and args.modes):
        # a pure --merge measures nothing: the file gets the runs' own records at once. A grid
        # that measures writes only after its first run, so one stopped before that leaves the
        # file as it was (its top-level command would otherwise name a run that measured nothing)
        payload = write_outputs(args, results)
    for model in args.models:
        for mode in args.modes:
            measured.append({**measure(args, model, mode), **record})
            results = grown(kept, measured)
            payload = write_outputs(args, results)  # after every run: a stopped grid keeps them
    print(table(results))
    for row in payload["against_single"]:
        print(f"{row['model']} {row['mode']} BLEU minus single, by step: {row['bleu_minus_single']}")
    for row in payload["against_thesis"]:
        print(f"{row['model']} {row['mode']}: BLEU {_cell(row['bleu'], '.2f')} "
              f"({_cell(row['bleu_minus_baseline'], '+.2f')} vs {BASELINE}); thesis "
              f"{_cell(row['thesis_bleu'], '.2f')} ({_cell(row['thesis_minus_baseline'], '+.2f')})")
    print(f"wrote {args.results} and {args.plot}")
    return 0
