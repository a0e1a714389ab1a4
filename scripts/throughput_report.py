"""Throughput under horovodrun: target tokens/s per rank and in total, and the step time split
into compute and communication.

    .venv/bin/python scripts/throughput_report.py                     # N = 1, 2; results/throughput.json
    .venv/bin/python scripts/throughput_report.py --ranks 1,2,4 --steps 6 --out /tmp/tp.json

For each N the script launches itself under ``horovodrun -np N -H localhost:N``. Every rank
builds the trainer's model and optimizer (``build_and_compile``: Horovod DistributedOptimizer,
``train.sparse_as_dense``, scaled LR) and times real ``--batch-tokens`` batches twice with
``model.fit``: once with the Horovod-wrapped optimizer (the real distributed step) and once with a
plain copy of the optimizer (compute only: forward, backward, update). Per step:

* compute = median step time without Horovod;
* communication (direct) = median distributed step time - compute (includes waiting for the
  slowest rank);
* communication (timeline) = time rank 0's Horovod timeline has an allreduce/allgather in flight
  during the measured distributed steps (intervals merged: fused tensors overlap), and
  negotiation time (ranks agreeing that a tensor is ready) separately.

Warm-up steps (tracing) are excluded. With one rank the optimizer is not wrapped (nothing to
exchange), so both timings measure the same step and their difference is the noise. Ranks share
the CPU cores (and with anything else running: the 1-minute load average is recorded), so
compare N only within one run and one machine.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import List

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hvd_common  # noqa: E402


# ----------------------------------------------------------------------------- worker (per rank)
def worker(args: argparse.Namespace) -> None:
    import json  # noqa: PLC0415

    from tf_nmt import distributed  # noqa: PLC0415
    from tf_nmt.compat import keras, tf  # noqa: PLC0415
    from tf_nmt.training.trainer import build_and_compile  # noqa: PLC0415

    ctx = distributed.init(enabled=True)
    cfg = hvd_common.study_config(args.preset, args.set, args.batch_tokens)
    total = args.warmup + args.steps
    tokenizer, batches = hvd_common.rank_batches(cfg, ctx.rank, ctx.size, total,
                                                 args.pairs_per_rank)
    tokens = [hvd_common.batch_tokens(x, y)["target_tokens"] for x, y in batches]
    timeline = Path(args.worker_out) / "timeline.json"

    class StepTimer(keras.callbacks.Callback):
        def __init__(self, record_timeline: bool):
            super().__init__()
            self.times: List[float] = []
            self.record_timeline = record_timeline and ctx.is_chief

        def on_train_batch_begin(self, batch, logs=None):
            if batch == args.warmup and self.record_timeline:
                ctx.hvd.start_timeline(str(timeline))
            self._t0 = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            float(logs["loss"])  # wait for the step to finish
            self.times.append(time.perf_counter() - self._t0)

        def on_train_end(self, logs=None):
            if self.record_timeline:
                ctx.hvd.stop_timeline()

    def timed(run_ctx, record_timeline: bool) -> List[float]:
        keras.utils.set_random_seed(cfg.train.seed)
        model = build_and_compile(cfg, tokenizer.vocab_size, run_ctx)
        distributed.broadcast_variables(model.variables, run_ctx)
        ds = tf.data.Dataset.from_generator(lambda: iter(batches), output_signature=(
            {"source": tf.TensorSpec([None, None], tf.int32),
             "target_in": tf.TensorSpec([None, None], tf.int32)},
            tf.TensorSpec([None, None], tf.int32)))
        timer = StepTimer(record_timeline)
        model.fit(ds, steps_per_epoch=total, epochs=1, verbose=0, callbacks=[timer])
        return timer.times[args.warmup:]

    distributed_times = timed(ctx, record_timeline=True)
    compute_times = timed(distributed.SINGLE, record_timeline=False)
    out = {"rank": ctx.rank, "size": ctx.size, "distributed_s": distributed_times,
           "compute_s": compute_times, "target_tokens": tokens[args.warmup:],
           "sparse_as_dense": cfg.train.sparse_as_dense,
           "mixed_precision": cfg.train.mixed_precision}
    Path(args.worker_out, f"rank{ctx.rank}.json").write_text(json.dumps(out))


# ------------------------------------------------------------------------- launcher + analysis
def summarise(ranks: List[dict], timeline_path: Path) -> dict:
    from tf_nmt.distributed.timeline import DATA_OPS, busy_us, read_timeline  # noqa: PLC0415

    size, steps = len(ranks), len(ranks[0]["distributed_s"])
    step_s = statistics.median(max(r["distributed_s"][i] for r in ranks) for i in range(steps))
    compute_s = statistics.median(statistics.median(r["compute_s"]) for r in ranks)
    per_rank_tokens = [statistics.fmean(r["target_tokens"]) for r in ranks]
    per_rank_rate = [t / step_s for t in per_rank_tokens]
    row = {"ranks": size, "measured_steps": steps, "step_s": step_s, "compute_s": compute_s,
           "comm_direct_s": max(step_s - compute_s, 0.0),
           "target_tokens_per_rank_step": statistics.fmean(per_rank_tokens),
           "tokens_per_s_per_rank": statistics.fmean(per_rank_rate),
           "tokens_per_s_total": sum(per_rank_rate),
           "compute_only_tokens_per_s_per_rank": statistics.fmean(per_rank_tokens) / compute_s}
    if size > 1:  # one rank: wrap_optimizer leaves the optimizer alone, nothing to exchange
        ops = read_timeline(timeline_path)
        row["comm_timeline_s"] = busy_us(ops, DATA_OPS) / 1e6 / steps
        row["negotiate_timeline_s"] = busy_us(ops, [f"NEGOTIATE_{k}" for k in DATA_OPS]) / 1e6 / steps
        row["timeline_ops"] = sorted({op.kind for op in ops})
    row["comm_share"] = row["comm_direct_s"] / step_s if step_s else None
    return row


def run_all(args: argparse.Namespace) -> dict:
    from tf_nmt.distributed import launcher  # noqa: PLC0415

    import os  # noqa: PLC0415

    rows, load = [], [os.getloadavg()[0]]
    for n in hvd_common.parse_ranks(args.ranks):
        with tempfile.TemporaryDirectory(prefix=f"tp{n}-") as tmp:
            t0 = time.perf_counter()
            worker_args = ["--worker", "--worker-out", tmp, "--preset", args.preset,
                           "--batch-tokens", str(args.batch_tokens), "--steps", str(args.steps),
                           "--warmup", str(args.warmup), "--pairs-per-rank",
                           str(args.pairs_per_rank)]
            for item in args.set:
                worker_args += ["--set", item]
            launcher.run(Path(__file__).resolve(), worker_args, n, args.controller,
                         env={"HOROVOD_TIMELINE": "DYNAMIC"}, timeout=args.timeout,
                         threads=args.threads)
            ranks = hvd_common.read_ranks(Path(tmp), n)
            rows.append(summarise(ranks, Path(tmp) / "timeline.json"))
            load.append(os.getloadavg()[0])
            print(f"N={n}: {time.perf_counter() - t0:.0f} s", flush=True)
    base = rows[0]
    for row in rows:
        row["total_speedup_vs_first"] = row["tokens_per_s_total"] / base["tokens_per_s_total"]
    return {"preset": args.preset, "overrides": args.set, "batch_tokens": args.batch_tokens,
            "controller": args.controller, "warmup_steps": args.warmup,
            "threads_per_rank": args.threads, "cpu_count": os.cpu_count(),
            "load_average_1min": load, "rows": rows}


def print_table(result: dict) -> None:
    head = (f"{'N':>3} | {'step s':>7} {'compute s':>9} {'comm s':>7} {'comm tl s':>9} "
            f"{'negot s':>7} {'comm %':>6} | {'tok/s/rank':>10} {'tok/s total':>11} {'speedup':>7}")
    print(f"\n{result['batch_tokens']}-token batches per rank, preset {result['preset']}, "
          f"{result['threads_per_rank']} thread(s) per rank; comm = step - compute, "
          "comm tl = Horovod timeline busy time")
    print(head)
    print("-" * len(head))
    for r in result["rows"]:
        tl = r.get("comm_timeline_s")
        neg = r.get("negotiate_timeline_s")
        print(f"{r['ranks']:>3} | {r['step_s']:>7.3f} {r['compute_s']:>9.3f} "
              f"{r['comm_direct_s']:>7.3f} {'-' if tl is None else f'{tl:.3f}':>9} "
              f"{'-' if neg is None else f'{neg:.3f}':>7} {100 * r['comm_share']:>5.0f}% | "
              f"{r['tokens_per_s_per_rank']:>10,.0f} {r['tokens_per_s_total']:>11,.0f} "
              f"{r['total_speedup_vs_first']:>6.2f}x")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--steps", type=int, default=6, help="measured steps per run")
    p.add_argument("--warmup", type=int, default=3, help="unmeasured first steps (tracing)")
    p.add_argument("--batch-tokens", type=int, default=5000)
    p.add_argument("--pairs-per-rank", type=int, default=3000)
    p.add_argument("--threads", type=int, default=1, help="TF intra/inter-op threads per rank")
    p.add_argument("--preset", default="quickstart")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--controller", default="gloo", choices=("gloo", "mpi"))
    p.add_argument("--out", type=Path, default=Path("results/throughput.json"))
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    if args.out.exists() and not args.overwrite:
        raise SystemExit(f"{args.out} exists: pass --overwrite to replace it")
    result = run_all(args)
    print_table(result)
    hvd_common.write_json(args.out, result, overwrite=args.overwrite)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
