"""Accumulation-size study: what Horovod moves and accumulates per step for the Transformer's
gradients, with ``sparse_as_dense`` off (IndexedSlices -> allgather) and on (dense allreduce).

    .venv/bin/python scripts/accumulation_study.py                  # N = 1, 2, 4; writes results/
    .venv/bin/python scripts/accumulation_study.py --ranks 1,2 --steps 2 --out /tmp/acc.json

For each N the script launches itself under ``horovodrun -np N -H localhost:N`` (oversubscribed
beyond the cores). Every rank builds the quickstart-sized Transformer twice -- with the tied
embedding/output projection the trainer uses, and untied -- and for a few real batches of
``--batch-tokens`` tokens computes its local gradients and averages them with Horovod both ways
(:func:`tf_nmt.distributed.exchange.exchange_gradients`), recording per tensor the bytes it
handed to Horovod and the bytes of the result Horovod returned. Rank 0 also records a Horovod
timeline of the measured steps, whose allgather result shapes must add up to the same bytes.

Curve to 64, 300 and 1200 ranks (see :mod:`tf_nmt.distributed.accounting`): the allgather
buffer is the sum over ranks of each rank's slice bytes, extrapolated as N x the measured mean
slice; the allreduce buffer is the dense tensor, constant in N.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hvd_common  # noqa: E402

from tf_nmt.distributed import accounting  # noqa: E402

VARIANTS = {"tied": True, "untied": False}  # tie_embeddings per variant
SEED_RATIO, SEED_RANKS = 82.0, 64           # the seed study's figure (5000-token batches)
MB = 1e6


# ----------------------------------------------------------------------------- worker (per rank)
def worker(args: argparse.Namespace) -> None:
    import json  # noqa: PLC0415

    from tf_nmt import distributed  # noqa: PLC0415
    from tf_nmt.compat import keras, tf  # noqa: PLC0415
    from tf_nmt.distributed.exchange import exchange_gradients, step_totals  # noqa: PLC0415
    from tf_nmt.models import build_model  # noqa: PLC0415
    from tf_nmt.models.losses import LabelSmoothedCrossEntropy  # noqa: PLC0415

    ctx = distributed.init(enabled=True)
    hvd = ctx.hvd
    cfg = hvd_common.study_config(args.preset, args.set, args.batch_tokens)
    tokenizer, batches = hvd_common.rank_batches(cfg, ctx.rank, ctx.size, args.steps,
                                                 args.pairs_per_rank)
    loss_fn = LabelSmoothedCrossEntropy(cfg.train.label_smoothing)
    models, steps_fn, opts = {}, {}, {}
    for variant, tie in VARIANTS.items():
        keras.utils.set_random_seed(cfg.train.seed)
        model = build_model(cfg.model.kind, tokenizer.vocab_size,
                            **{**cfg.model.hparams, "tie_embeddings": tie})  # float32 variables
        model({"source": tf.ones([1, 4], tf.int32), "target_in": tf.ones([1, 4], tf.int32)})
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
        entry = {"step": step, "tokens": hvd_common.batch_tokens(x, y)}
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
    Path(args.worker_out, f"rank{ctx.rank}.json").write_text(json.dumps(out))


# ------------------------------------------------------------------------- launcher + analysis
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
    mean = lambda xs: statistics.fmean(xs)  # noqa: E731
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
    from tf_nmt.distributed.timeline import bytes_by_kind, read_timeline  # noqa: PLC0415

    path = out_dir / "timeline.json"
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


def run_all(args: argparse.Namespace) -> dict:
    measured: Dict[str, List[dict]] = {v: [] for v in VARIANTS}
    checks, tokens, meta = [], [], {}
    for n in hvd_common.parse_ranks(args.ranks):
        with tempfile.TemporaryDirectory(prefix=f"acc{n}-") as tmp:
            t0 = time.perf_counter()
            from tf_nmt.distributed import launcher  # noqa: PLC0415

            worker_args = ["--worker", "--worker-out", tmp, "--preset", args.preset,
                           "--batch-tokens", str(args.batch_tokens), "--steps", str(args.steps),
                           "--pairs-per-rank", str(args.pairs_per_rank)]
            for item in args.set:
                worker_args += ["--set", item]
            launcher.run(Path(__file__).resolve(), worker_args, n, args.controller,
                         env={"HOROVOD_TIMELINE": "DYNAMIC"}, timeout=args.timeout)
            ranks = hvd_common.read_ranks(Path(tmp), n)
            print(f"N={n}: {time.perf_counter() - t0:.0f} s", flush=True)
            for v in VARIANTS:
                measured[v].append(summarise(ranks, v))
            checks.append({"ranks": n, **timeline_check(Path(tmp), ranks[0])})
            tokens += [s["tokens"] for r in ranks for s in r["steps"]]
            meta = {"vocab_size": ranks[0]["vocab_size"],
                    "num_parameters": ranks[0]["num_parameters"]}
    result = {"batch_tokens": args.batch_tokens, "preset": args.preset, "overrides": args.set,
              "controller": args.controller, "steps_per_run": args.steps, **meta,
              "tokens_per_rank_step": {k: statistics.fmean(t[k] for t in tokens)
                                       for k in tokens[0]},
              "model": ("off: buffer = sum over ranks of each rank's IndexedSlices bytes (values "
                        "float32 + indices int64) + dense rest; extrapolated with the measured "
                        "mean slice per rank. on: buffer = dense size of all gradients, constant "
                        "in N. received: allgather = others' slices (measured), allreduce = ring "
                        "2(N-1)/N x tensor (model)."),
              "seed": {"ranks": SEED_RANKS, "ratio": SEED_RATIO, "batch_tokens": 5000},
              "timeline_checks": checks, "variants": {}}
    extra = hvd_common.parse_ranks(args.extrapolate)
    for v, rows in measured.items():
        slices = statistics.fmean(r["sparse_slice_bytes_mean"] for r in rows)
        curve = accounting.curve(sorted(set(r["ranks"] for r in rows) | set(extra)), slices,
                                 rows[0]["sparse_dense_bytes"], rows[0]["dense_rest_bytes"])
        result["variants"][v] = {"tie_embeddings": VARIANTS[v], "measured": rows,
                                 "slice_bytes_per_rank": slices, "curve": curve}
    return result


def print_table(result: dict) -> None:
    head = (f"{'variant':7} {'N':>5} {'src':4} | {'off: sent/rank':>14} {'recv/rank':>10} "
            f"{'buffer':>10} | {'on: sent/rank':>13} {'recv/rank':>10} {'buffer':>8} | "
            f"{'off/on':>7} {'emb off/on':>10}")
    print(f"\nbytes per step in MB, {result['batch_tokens']}-token batches per rank, "
          f"{result['tokens_per_rank_step']['sentences']:.0f} sentences/rank/step on average")
    print(head)
    print("-" * len(head))
    fmt = lambda x: "-" if x is None else f"{x:.1f}x"  # noqa: E731
    for v, data in result["variants"].items():
        measured = {r["ranks"]: r for r in data["measured"]}
        for row in data["curve"]:
            src = "meas" if row["ranks"] in measured else "extr"
            r = measured.get(row["ranks"], row)
            print(f"{v:7} {row['ranks']:>5} {src:4} | {r['off_contributed_bytes'] / MB:>14.2f} "
                  f"{r['off_received_bytes'] / MB:>10.2f} {r['off_buffer_bytes'] / MB:>10.1f} | "
                  f"{r['on_contributed_bytes'] / MB:>13.2f} {r['on_received_bytes'] / MB:>10.2f} "
                  f"{r['on_buffer_bytes'] / MB:>8.1f} | {fmt(r['buffer_ratio']):>7} "
                  f"{fmt(r['sparse_buffer_ratio']):>10}")
    seed = result["seed"]
    ours = {v: next(r for r in d["curve"] if r["ranks"] == seed["ranks"])
            for v, d in result["variants"].items()} if any(
        r["ranks"] == seed["ranks"] for r in next(iter(result["variants"].values()))["curve"]) else {}
    for v, row in ours.items():
        print(f"at {seed['ranks']} ranks, {v}: off/on accumulation {fmt(row['buffer_ratio'])} "
              f"(all gradients), {fmt(row['sparse_buffer_ratio'])} (embedding); "
              f"seed: {seed['ratio']:.0f}x")


def plot(result: dict, path: Path) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
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
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ranks N (markers: measured, lines: model)")
        ax.grid(True, which="both", alpha=0.3)
    ax1.set_ylabel("accumulated gradient buffer per step (MB)")
    ax2.set_ylabel("off / on")
    ax1.legend(fontsize=7)
    ax2.legend(fontsize=7)
    fig.suptitle(f"Horovod gradient accumulation, {result['batch_tokens']}-token batches per rank")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp" + path.suffix)
    fig.savefig(tmp, dpi=110)
    tmp.replace(path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", default="1,2,4", help="rank counts to measure under horovodrun")
    p.add_argument("--extrapolate", default="64,300,1200")
    p.add_argument("--steps", type=int, default=4, help="measured steps per run")
    p.add_argument("--batch-tokens", type=int, default=5000)
    p.add_argument("--pairs-per-rank", type=int, default=3000,
                   help="train pairs each rank samples and tokenises")
    p.add_argument("--preset", default="quickstart")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--controller", default="gloo", choices=("gloo", "mpi"))
    p.add_argument("--out", type=Path, default=Path("results/accumulation.json"))
    p.add_argument("--plot", type=Path, default=None, help="default: --out with .png")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    plot_path = args.plot or args.out.with_suffix(".png")
    for path in (args.out, plot_path):
        if path.exists() and not args.overwrite:
            raise SystemExit(f"{path} exists: pass --overwrite to replace it")
    result = run_all(args)
    print_table(result)
    hvd_common.write_json(args.out, result, overwrite=args.overwrite)
    plot(result, plot_path)
    print(f"wrote {args.out} and {plot_path}")


if __name__ == "__main__":
    main()
