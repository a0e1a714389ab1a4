"""Accumulation-size study: what Horovod moves and accumulates per step for the Transformer's
gradients, with ``sparse_as_dense`` off (IndexedSlices -> allgather) and on (dense allreduce).

    python -m experiments accumulation                                   # N = 1, 2, 4; writes results/
    python -m experiments accumulation --ranks 1,2 --steps 2 --out /tmp/acc.json

(``python -m experiments accumulation`` takes the same arguments.) For each N the study launches its
worker under ``horovodrun -np N -H localhost:N`` (oversubscribed beyond the cores). Every rank
builds the quickstart-sized Transformer twice -- with the tied embedding/output projection the
trainer uses, and untied -- and for a few real batches of ``--batch-tokens`` tokens computes its
local gradients and averages them with Horovod both ways
(:func:`experiments.accumulation.horovod_traffic.exchange_gradients`), recording per tensor the
bytes it handed to Horovod and the bytes of the result Horovod returned. Rank 0 also records a Horovod
timeline of the measured steps, whose allgather result shapes must add up to the same bytes.

Curve to 64, 300 and 1200 ranks (see :mod:`tf_nmt.distributed.accounting`): the allgather
buffer is the sum over ranks of each rank's slice bytes, extrapolated as N x the measured mean
slice; the allreduce buffer is the dense tensor, constant in N.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from experiments.accumulation.horovod_traffic import exchange_gradients, step_totals
from experiments.lib import common, launcher
from experiments.lib.plotting import log_log_axes, save_figure, subplots
from experiments.lib.timeline import bytes_by_kind, read_timeline
from tf_nmt import distributed
from tf_nmt.compat import keras, tf
from tf_nmt.data.sample import sample_batches
from tf_nmt.distributed import accounting
from tf_nmt.models.losses import LabelSmoothedCrossEntropy
from tf_nmt.run_dir import build_initialised_model

VARIANTS = {"tied": True, "untied": False}  # tie_embeddings per variant
SEED_RATIO, SEED_RANKS = 82.0, 64           # the seed study's figure (5000-token batches)
MB = 1e6


# ----------------------------------------------------------------------------- worker (per rank)
def worker(args: argparse.Namespace) -> None:
    """One rank: exchange real gradients both ways and write ``rank<r>.json``."""
    ctx = distributed.init(enabled=True)
    hvd = ctx.hvd
    cfg = common.study_config(args.preset, args.set, args.batch_tokens)
    tokenizer, batches = sample_batches(cfg.data, args.steps, args.pairs_per_rank,
                                        ctx.rank, ctx.size)
    loss_fn = LabelSmoothedCrossEntropy(cfg.train.label_smoothing, kernel=cfg.train.loss_kernel)
    models, steps_fn, opts = {}, {}, {}
    for variant, tie in VARIANTS.items():
        keras.utils.set_random_seed(cfg.train.seed)
        model = build_initialised_model(cfg.model.kind, tokenizer.vocab_size,
                                        {**cfg.model.hparams, "tie_embeddings": tie})
        distributed.broadcast_variables(model.variables, ctx)
        models[variant], opts[variant] = model, keras.optimizers.legacy.Adam(1e-4)

        def local_grads(x, y, model=model):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            return loss, tape.gradient(loss, model.trainable_variables)

        steps_fn[variant] = tf.function(local_grads, reduce_retracing=True)

    timeline = Path(args.worker_out) / "timeline.json"
    if ctx.is_chief:
        hvd.start_timeline(str(timeline))
    records: List[dict] = []
    for step, (x, y) in enumerate(batches):
        entry = {"step": step, "tokens": common.batch_tokens(x, y)}
        for variant, model in models.items():
            loss, grads = steps_fn[variant](x, y)
            names = [f"{i}:{v.name}" for i, v in enumerate(model.trainable_variables)]
            _, off = exchange_gradients(grads, names, hvd, sparse_as_dense=False)
            averaged, on = exchange_gradients(grads, names, hvd, sparse_as_dense=True)
            opts[variant].apply_gradients(zip(averaged, model.trainable_variables))
            entry[variant] = {"loss": float(loss), "off": step_totals(off), "on": step_totals(on),
                              "sparse_tensors": [r.to_dict() for r in off if r.sent.sparse]}
        records.append(entry)
    if ctx.is_chief:
        hvd.stop_timeline()
    out = {"rank": ctx.rank, "size": ctx.size, "vocab_size": tokenizer.vocab_size,
           "num_parameters": {v: int(sum(int(tf.size(w)) for w in m.trainable_variables))
                              for v, m in models.items()},
           "steps": records}
    common.rank_file(Path(args.worker_out), ctx.rank).write_text(json.dumps(out))


# --------------------------------------------------------------------------------------- analysis
def summarise(ranks: List[dict], variant: str) -> dict:
    """Per-step exchange of every rank at one N, averaged; checks the allgather model exactly."""
    size = len(ranks)
    per_step, model_errors, slices = [], [], []
    for s in range(len(ranks[0]["steps"])):
        offs = [r["steps"][s][variant]["off"] for r in ranks]
        ons = [r["steps"][s][variant]["on"] for r in ranks]
        own = [o["sparse_contributed_bytes"] for o in offs]
        slices += own
        rest = offs[0]["dense_bytes"]
        for rank, (o, n) in enumerate(zip(offs, ons)):
            model_errors.append(abs(o["sparse_buffer_bytes"] - sum(own)))  # gathered == sum
            off = accounting.Exchange(o["contributed_bytes"],
                                      (o["sparse_buffer_bytes"] - own[rank])
                                      + accounting.ring_allreduce_bytes(rest, size),
                                      o["buffer_bytes"])
            on = accounting.Exchange(n["contributed_bytes"],
                                     accounting.ring_allreduce_bytes(n["contributed_bytes"], size),
                                     n["buffer_bytes"])
            per_step.append((off, on, o["sparse_dense_bytes"], o["sparse_buffer_bytes"]))
    mean = statistics.fmean
    off_buf = mean([p[0].buffer for p in per_step])
    on_buf = mean([p[1].buffer for p in per_step])
    sparse_dense = ranks[0]["steps"][0][variant]["off"]["sparse_dense_bytes"]
    sparse_buf = mean([p[3] for p in per_step])
    return {"ranks": size, "steps": len(ranks[0]["steps"]),
            "off_contributed_bytes": mean([p[0].contributed for p in per_step]),
            "off_received_bytes": mean([p[0].received for p in per_step]),
            "off_buffer_bytes": off_buf,
            "on_contributed_bytes": mean([p[1].contributed for p in per_step]),
            "on_received_bytes": mean([p[1].received for p in per_step]),
            "on_buffer_bytes": on_buf,
            "buffer_ratio": off_buf / on_buf,
            "sparse_buffer_ratio": sparse_buf / sparse_dense if sparse_dense else None,
            "sparse_slice_bytes_mean": mean(slices), "sparse_slice_bytes_min": min(slices),
            "sparse_slice_bytes_max": max(slices), "sparse_dense_bytes": sparse_dense,
            "dense_rest_bytes": ranks[0]["steps"][0][variant]["off"]["dense_bytes"],
            "allgather_model_max_error_bytes": max(model_errors)}


def timeline_check(out_dir: Path, rank0: dict) -> dict:
    """Allgather/allreduce result bytes in rank 0's Horovod timeline vs the tensors it measured."""
    path = Path(out_dir) / "timeline.json"
    if not path.is_file():
        return {"available": False}
    by_kind = bytes_by_kind(read_timeline(path))
    steps = [step[v] for step in rank0["steps"] for v in VARIANTS]
    gathered = sum(s["off"]["sparse_buffer_bytes"] for s in steps)
    reduced = sum(s["off"]["buffer_bytes"] - s["off"]["sparse_buffer_bytes"]
                  + s["on"]["buffer_bytes"] for s in steps)
    return {"available": True, "allgather_bytes": by_kind.get("ALLGATHER", 0),
            "allreduce_bytes": by_kind.get("ALLREDUCE", 0),
            "measured_gathered_bytes": gathered, "measured_reduced_bytes": reduced,
            "match": by_kind.get("ALLGATHER", 0) == gathered
            and by_kind.get("ALLREDUCE", 0) == reduced}


def combine(measured: Dict[str, List[dict]], extrapolate: Sequence[int]) -> Dict[str, dict]:
    """Per variant: the measured rows, the mean slice per rank, and the curve over the measured
    and extrapolated rank counts."""
    variants = {}
    for v, rows in measured.items():
        slices = statistics.fmean(r["sparse_slice_bytes_mean"] for r in rows)
        curve = accounting.curve(sorted(set(r["ranks"] for r in rows) | set(extrapolate)), slices,
                                 rows[0]["sparse_dense_bytes"], rows[0]["dense_rest_bytes"])
        variants[v] = {"tie_embeddings": VARIANTS[v], "measured": rows,
                       "slice_bytes_per_rank": slices, "curve": curve}
    return variants


# ------------------------------------------------------------------------------------- launching
def run_all(args: argparse.Namespace) -> dict:
    """Measure every N of ``--ranks`` under horovodrun; the combined result."""
    measured: Dict[str, List[dict]] = {v: [] for v in VARIANTS}
    checks, tokens, meta = [], [], {}
    for n in common.parse_ranks(args.ranks):
        with tempfile.TemporaryDirectory(prefix=f"acc{n}-") as tmp:
            t0 = time.perf_counter()
            launcher.run(common.experiments_script(), common.worker_argv("accumulation", args, tmp),
                         n, args.controller,
                         env={"HOROVOD_TIMELINE": "DYNAMIC"}, timeout=args.timeout)
            ranks = common.read_ranks(Path(tmp), n)
            print(f"N={n}: {time.perf_counter() - t0:.0f} s", flush=True)
            for v in VARIANTS:
                measured[v].append(summarise(ranks, v))
            checks.append({"ranks": n, **timeline_check(Path(tmp), ranks[0])})
            tokens += [s["tokens"] for r in ranks for s in r["steps"]]
            meta = {"vocab_size": ranks[0]["vocab_size"],
                    "num_parameters": ranks[0]["num_parameters"]}
    return {"batch_tokens": args.batch_tokens, "preset": args.preset, "overrides": args.set,
            "controller": args.controller, "steps_per_run": args.steps, **meta,
            "tokens_per_rank_step": {k: statistics.fmean(t[k] for t in tokens)
                                     for k in tokens[0]},
            "model": ("off: buffer = sum over ranks of each rank's IndexedSlices bytes (values "
                      "float32 + indices int64) + dense rest; extrapolated with the measured "
                      "mean slice per rank. on: buffer = dense size of all gradients, constant "
                      "in N. received: allgather = others' slices (measured), allreduce = ring "
                      "2(N-1)/N x tensor (model)."),
            "seed": {"ranks": SEED_RANKS, "ratio": SEED_RATIO, "batch_tokens": 5000},
            "timeline_checks": checks,
            "variants": combine(measured, common.parse_ranks(args.extrapolate))}


# -------------------------------------------------------------------------------------- reporting
def _ratio(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.1f}x"


def table(result: dict) -> str:
    """The bytes-per-step table (MB), measured and extrapolated rows, and the seed comparison."""
    head = (f"{'variant':7} {'N':>5} {'src':4} | {'off: sent/rank':>14} {'recv/rank':>10} "
            f"{'buffer':>10} | {'on: sent/rank':>13} {'recv/rank':>10} {'buffer':>8} | "
            f"{'off/on':>7} {'emb off/on':>10}")
    lines = [f"bytes per step in MB, {result['batch_tokens']}-token batches per rank, "
             f"{result['tokens_per_rank_step']['sentences']:.0f} sentences/rank/step on average",
             head, "-" * len(head)]
    for v, data in result["variants"].items():
        measured = {r["ranks"]: r for r in data["measured"]}
        for row in data["curve"]:
            src = "meas" if row["ranks"] in measured else "extr"
            r = measured.get(row["ranks"], row)
            lines.append(
                f"{v:7} {row['ranks']:>5} {src:4} | {r['off_contributed_bytes'] / MB:>14.2f} "
                f"{r['off_received_bytes'] / MB:>10.2f} {r['off_buffer_bytes'] / MB:>10.1f} | "
                f"{r['on_contributed_bytes'] / MB:>13.2f} {r['on_received_bytes'] / MB:>10.2f} "
                f"{r['on_buffer_bytes'] / MB:>8.1f} | {_ratio(r['buffer_ratio']):>7} "
                f"{_ratio(r['sparse_buffer_ratio']):>10}")
    seed = result["seed"]
    for v, data in result["variants"].items():
        row = next((r for r in data["curve"] if r["ranks"] == seed["ranks"]), None)
        if row is not None:
            lines.append(f"at {seed['ranks']} ranks, {v}: off/on accumulation "
                         f"{_ratio(row['buffer_ratio'])} (all gradients), "
                         f"{_ratio(row['sparse_buffer_ratio'])} (embedding); "
                         f"seed: {seed['ratio']:.0f}x")
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    """Buffer per step against N (left) and the off/on ratio (right), log-log."""
    fig, axes = subplots(1, 2, figsize=(11, 4.2))
    ax1, ax2 = axes[0]
    for (v, data), color in zip(result["variants"].items(), ("tab:blue", "tab:orange")):
        top = max(r["ranks"] for r in data["curve"])
        xs = sorted({round(1.25 ** k) for k in range(64) if 1.25 ** k <= top} | {top})
        first = data["measured"][0]
        line = accounting.curve(xs, data["slice_bytes_per_rank"], first["sparse_dense_bytes"],
                                first["dense_rest_bytes"])
        ax1.plot(xs, [r["off_buffer_bytes"] / MB for r in line], "-", color=color,
                 label=f"{v}: sparse_as_dense off")
        ax1.plot(xs, [r["on_buffer_bytes"] / MB for r in line], "--", color=color,
                 label=f"{v}: sparse_as_dense on")
        mx = [r["ranks"] for r in data["measured"]]
        ax1.plot(mx, [r["off_buffer_bytes"] / MB for r in data["measured"]], "o", color=color)
        ax1.plot(mx, [r["on_buffer_bytes"] / MB for r in data["measured"]], "s", color=color,
                 mfc="none")
        ax2.plot(xs, [r["buffer_ratio"] for r in line], "-", color=color,
                 label=f"{v}: all gradients")
        ax2.plot(mx, [r["buffer_ratio"] for r in data["measured"]], "o", color=color)
        if line[0]["sparse_buffer_ratio"] is not None:
            ax2.plot(xs, [r["sparse_buffer_ratio"] for r in line], ":", color=color,
                     label=f"{v}: embedding only")
    ax2.plot([result["seed"]["ranks"]], [result["seed"]["ratio"]], "k*", ms=12,
             label=f"seed: {result['seed']['ratio']:.0f}x at {result['seed']['ranks']}")
    log_log_axes((ax1, ax2), "ranks N (markers: measured, lines: model)")
    ax1.set_ylabel("accumulated gradient buffer per step (MB)")
    ax2.set_ylabel("off / on")
    fig.suptitle(f"Horovod gradient accumulation, {result['batch_tokens']}-token batches per rank")
    save_figure(fig, path)


# ----------------------------------------------------------------------------------- entry point
def build_parser() -> argparse.ArgumentParser:
    """The study's command line (also ``python -m experiments accumulation``)."""
    p = argparse.ArgumentParser(prog="python -m experiments accumulation",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--extrapolate", default="64,300,1200")
    p.add_argument("--steps", type=int, default=4, help="measured steps per run")
    p.add_argument("--plot", type=Path, default=None, help="default: --out with .png")
    common.add_rank_study_args(p, out=common.results_path(__file__, "accumulation.json"), ranks="1,2,4")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the study (or, with ``--worker``, one rank of it)."""
    args = build_parser().parse_args(argv)
    figures = {args.plot or args.out.with_suffix(".png"): plot}
    return common.run_rank_study(args, worker, run_all, table, figures)
