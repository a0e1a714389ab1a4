"""Throughput under horovodrun: target tokens/s per rank and in total, and the step time split
into compute and communication.

    python -m experiments throughput                          # N = 1, 2; experiments/throughput/results/throughput.json
    python -m experiments throughput --ranks 1,2,4 --steps 6 --out /tmp/tp.json

(``python -m experiments throughput`` takes the same arguments.) For each N the study launches its
worker under ``horovodrun -np N -H localhost:N``. Every rank builds the trainer's model and
optimizer twice (:func:`experiments.lib.step_split.with_and_without_exchange`: the run's
distributed optimizer, and a copy that exchanges nothing) and times real ``--batch-tokens``
batches with ``model.fit`` on each. Per step:

* compute = median step time without the exchange;
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
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence

from tf_nmt import distributed
from tf_nmt.compat import keras, tf
from tf_nmt.data.sample import sample_batches
from experiments.lib import launcher
from experiments.lib.timeline import DATA_OPS, busy_us, read_timeline
from experiments.lib import common
from experiments.lib.step_split import StepSplit, with_and_without_exchange


class StepTimer(keras.callbacks.Callback):
    """Wall time of every ``fit`` step; optionally a Horovod timeline from step ``start_at``."""

    def __init__(self, start_timeline: Optional[Callable[[], None]] = None,
                 stop_timeline: Optional[Callable[[], None]] = None, start_at: int = 0) -> None:
        super().__init__()
        self.times: List[float] = []
        self.start_timeline, self.stop_timeline, self.start_at = start_timeline, stop_timeline, start_at

    def on_train_batch_begin(self, batch, logs=None):
        if batch == self.start_at and self.start_timeline is not None:
            self.start_timeline()
        self._t0 = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        float(logs["loss"])  # wait for the step to finish
        self.times.append(time.perf_counter() - self._t0)

    def on_train_end(self, logs=None):
        if self.stop_timeline is not None:
            self.stop_timeline()


# ----------------------------------------------------------------------------- worker (per rank)
def worker(args: argparse.Namespace) -> None:
    """One rank: time distributed and compute-only steps; write ``rank<r>.json``."""
    ctx = distributed.init(enabled=True)
    cfg = common.study_config(args.preset, args.set, args.batch_tokens)
    total = args.warmup + args.steps
    tokenizer, batches = sample_batches(cfg.data, total, args.pairs_per_rank, ctx.rank, ctx.size)
    tokens = [common.batch_tokens(x, y)["target_tokens"] for x, y in batches]
    timeline = Path(args.worker_out) / "timeline.json"
    full, local = with_and_without_exchange(cfg, tokenizer.vocab_size, ctx, seed=cfg.train.seed)

    def timed(model: Any, timer: StepTimer) -> List[float]:
        ds = tf.data.Dataset.from_generator(lambda: iter(batches), output_signature=(
            {"source": tf.TensorSpec([None, None], tf.int32),
             "target_in": tf.TensorSpec([None, None], tf.int32)},
            tf.TensorSpec([None, None], tf.int32)))
        model.fit(ds, steps_per_epoch=total, epochs=1, verbose=0, callbacks=[timer])
        return timer.times[args.warmup:]

    chief = ctx.is_chief
    distributed_times = timed(full, StepTimer(
        (lambda: ctx.hvd.start_timeline(str(timeline))) if chief else None,
        ctx.hvd.stop_timeline if chief else None, start_at=args.warmup))
    compute_times = timed(local, StepTimer())
    out = {"rank": ctx.rank, "size": ctx.size, "distributed_s": distributed_times,
           "compute_s": compute_times, "target_tokens": tokens[args.warmup:],
           "comm": cfg.train.comm, "mixed_precision": cfg.train.mixed_precision}
    common.rank_file(Path(args.worker_out), ctx.rank).write_text(json.dumps(out))


# --------------------------------------------------------------------------------------- analysis
def summarise(ranks: List[dict], timeline_path: Optional[Path]) -> dict:
    """One row of the table from the ranks' records (and rank 0's timeline when N > 1)."""
    size, steps = len(ranks), len(ranks[0]["distributed_s"])
    split = StepSplit(
        step_s=statistics.median(max(r["distributed_s"][i] for r in ranks) for i in range(steps)),
        compute_s=statistics.median(statistics.median(r["compute_s"]) for r in ranks))
    per_rank_tokens = [statistics.fmean(r["target_tokens"]) for r in ranks]
    per_rank_rate = [t / split.step_s for t in per_rank_tokens]
    row = {"ranks": size, "measured_steps": steps, "step_s": split.step_s,
           "compute_s": split.compute_s, "comm_direct_s": split.comm_s,
           "target_tokens_per_rank_step": statistics.fmean(per_rank_tokens),
           "tokens_per_s_per_rank": statistics.fmean(per_rank_rate),
           "tokens_per_s_total": sum(per_rank_rate),
           "compute_only_tokens_per_s_per_rank": statistics.fmean(per_rank_tokens) / split.compute_s}
    if size > 1 and timeline_path is not None:  # one rank: nothing is exchanged
        ops = read_timeline(timeline_path)
        row["comm_timeline_s"] = busy_us(ops, DATA_OPS) / 1e6 / steps
        row["negotiate_timeline_s"] = busy_us(ops, [f"NEGOTIATE_{k}" for k in DATA_OPS]) / 1e6 / steps
        row["timeline_ops"] = sorted({op.kind for op in ops})
    row["comm_share"] = split.comm_share
    return row


def with_speedups(rows: List[dict]) -> List[dict]:
    """``rows`` with each total rate relative to the first row's (``total_speedup_vs_first``)."""
    base = rows[0]["tokens_per_s_total"]
    return [{**row, "total_speedup_vs_first": row["tokens_per_s_total"] / base} for row in rows]


# ------------------------------------------------------------------------------------- launching
def run_all(args: argparse.Namespace) -> dict:
    """Measure every N of ``--ranks`` under horovodrun; the combined result."""
    rows, load = [], [os.getloadavg()[0]]
    for n in common.parse_ranks(args.ranks):
        with tempfile.TemporaryDirectory(prefix=f"tp{n}-") as tmp:
            t0 = time.perf_counter()
            argv = common.worker_argv("throughput", args, tmp, "--warmup", str(args.warmup))
            launcher.run(common.experiments_script(), argv, n, args.controller,
                         env={"HOROVOD_TIMELINE": "DYNAMIC"}, timeout=args.timeout,
                         threads=args.threads)
            rows.append(summarise(common.read_ranks(Path(tmp), n), Path(tmp) / "timeline.json"))
            load.append(os.getloadavg()[0])
            print(f"N={n}: {time.perf_counter() - t0:.0f} s", flush=True)
    return {"preset": args.preset, "overrides": args.set, "batch_tokens": args.batch_tokens,
            "controller": args.controller, "warmup_steps": args.warmup,
            "threads_per_rank": args.threads, "cpu_count": os.cpu_count(),
            "load_average_1min": load, "rows": with_speedups(rows)}


def _opt(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.3f}"


def table(result: dict) -> str:
    """The step-split and throughput table."""
    head = (f"{'N':>3} | {'step s':>7} {'compute s':>9} {'comm s':>7} {'comm tl s':>9} "
            f"{'negot s':>7} {'comm %':>6} | {'tok/s/rank':>10} {'tok/s total':>11} {'speedup':>7}")
    lines = [f"{result['batch_tokens']}-token batches per rank, preset {result['preset']}, "
             f"{result['threads_per_rank']} thread(s) per rank; comm = step - compute, "
             "comm tl = Horovod timeline busy time", head, "-" * len(head)]
    for r in result["rows"]:
        lines.append(
            f"{r['ranks']:>3} | {r['step_s']:>7.3f} {r['compute_s']:>9.3f} "
            f"{r['comm_direct_s']:>7.3f} {_opt(r.get('comm_timeline_s')):>9} "
            f"{_opt(r.get('negotiate_timeline_s')):>7} {100 * (r['comm_share'] or 0):>5.0f}% | "
            f"{r['tokens_per_s_per_rank']:>10,.0f} {r['tokens_per_s_total']:>11,.0f} "
            f"{r['total_speedup_vs_first']:>6.2f}x")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------- entry point
def build_parser() -> argparse.ArgumentParser:
    """The study's command line (also ``python -m experiments throughput``)."""
    p = argparse.ArgumentParser(prog="python -m experiments throughput",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=6, help="measured steps per run")
    p.add_argument("--warmup", type=int, default=3, help="unmeasured first steps (tracing)")
    p.add_argument("--threads", type=int, default=1, help="TF intra/inter-op threads per rank")
    common.add_rank_study_args(p, out=common.results_path(__file__, "throughput.json"), ranks="1,2")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the study (or, with ``--worker``, one rank of it)."""
    return common.run_rank_study(build_parser().parse_args(argv), worker, run_all, table, {})
