"""Graddrop's exchange during the drop warm-up: allgathered (position, value) pairs against the
dense fallback (an allreduce of the same kept entries), timed on the same ranks.

    python -m experiments graddrop-warmup                         # N = 2, 4; writes experiments/graddrop_warmup/results/graddrop_warmup.json
    python -m experiments graddrop-warmup --ranks 2 --kept 1,0.5,0.1 --rounds 2 --out /tmp/gw.json

For each N the study launches its worker under ``horovodrun -np N`` (one thread per rank). Every
rank takes the trainable variable shapes of the preset's model (7.6M parameters for the
quickstart Transformer) and, for each kept fraction f (drop ratio 1 - f), times
``GradDropExchange.exchange`` (selection, encoding, collectives, decoding, residual update) on
seeded Gaussian gradients with the fallback on and off. The two alternate within each round;
a cell is the median over rounds of the mean time of ``--steps`` exchanges, and the speed-up
the median of the per-round ratios. Where the fallback
does not apply (f under the crossover of ``dense_fallback_below``) both time the allgather,
which shows the noise of the measurement.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from tf_nmt.config import load_config, preset
from experiments.lib import launcher
from experiments.lib import common
from tf_nmt.utils import machine

VARIANTS = ("allgather", "fallback")  # dense_fallback off / on


def worker(args: argparse.Namespace) -> None:
    """One rank: time the exchange at every kept fraction, both ways; write ``rank<r>.json``."""
    from tf_nmt import distributed  # noqa: PLC0415 - TensorFlow only in the ranks
    from tf_nmt.compat import tf  # noqa: PLC0415
    from tf_nmt.distributed.comm.graddrop import (GradDropExchange, horovod_gather,  # noqa: PLC0415
                                                  horovod_sum)
    from tf_nmt.distributed.comm.settings import CommSettings  # noqa: PLC0415
    from tf_nmt.run_dir import build_initialised_model  # noqa: PLC0415

    ctx = distributed.init(enabled=True)
    cfg = load_config(None, list(args.set), base=preset(args.preset))
    model = build_initialised_model(cfg.model.kind, cfg.data.vocab_size, cfg.model.hparams)
    shapes = [v.shape for v in model.trainable_variables]
    rng = np.random.default_rng(100 + ctx.rank)
    grads = [tf.constant(rng.normal(size=s.as_list()).astype(np.float32)) for s in shapes]
    cells = []
    for kept in args.kept:
        settings = CommSettings(mode="graddrop", drop_ratio=1.0 - kept, drop_warmup_steps=0)
        fns, stats = {}, {}
        for name in VARIANTS:
            ex = GradDropExchange(settings, shapes, ctx.size, horovod_gather(ctx.hvd),
                                  seed=ctx.rank, reduce=horovod_sum(ctx.hvd),
                                  dense_fallback=name == "fallback")
            residuals = [tf.Variable(tf.zeros(s)) for s in shapes]
            fns[name] = (ex, tf.function(lambda step, ex=ex, res=residuals:
                                         ex.exchange(grads, res, step)))
        times: Dict[str, List[float]] = {name: [] for name in VARIANTS}
        step = 0
        for round_ in range(args.rounds + 1):  # round 0 traces and warms up
            for name in (VARIANTS if round_ % 2 else VARIANTS[::-1]):
                ex, fn = fns[name]
                start = time.perf_counter()
                for _ in range(args.steps):
                    out = fn(tf.constant(step, tf.int64))
                    step += 1
                float(out[0].numpy().ravel()[0])  # wait for the result
                if round_:
                    times[name].append((time.perf_counter() - start) / args.steps)
                stats[name] = ex.step_stats()
        cells.append({"kept": kept, "drop_ratio": 1.0 - kept,
                      "seconds": {n: statistics.median(t) for n, t in times.items()},
                      "rounds": times, "stats": stats,
                      "dense_below": fns["fallback"][0].dense_below})
    common.rank_file(Path(args.worker_out), ctx.rank).write_text(
        json.dumps({"rank": ctx.rank, "size": ctx.size, "cells": cells,
                                  "parameters": int(sum(s.num_elements() for s in shapes))}))


def measure(args: argparse.Namespace) -> Dict[str, Any]:
    """Every N of ``--ranks`` under horovodrun; rank 0's timings (all ranks wait for each other
    in every exchange)."""
    runs = []
    for n in common.parse_ranks(args.ranks):
        with tempfile.TemporaryDirectory(prefix=f"gw{n}-") as tmp:
            argv = ["graddrop-warmup", "--worker", "--worker-out", tmp,
                    "--preset", args.preset, "--kept", ",".join(map(str, args.kept)),
                    "--rounds", str(args.rounds), "--steps", str(args.steps),
                    *common.set_args(args.set)]
            t0 = time.perf_counter()
            launcher.run(common.experiments_script(), argv, n, args.controller,
                         timeout=args.timeout)
            ranks = common.read_ranks(Path(tmp), n)
            print(f"N={n}: {time.perf_counter() - t0:.0f} s", flush=True)
        runs.append({"ranks": n, "parameters": ranks[0]["parameters"], "cells": ranks[0]["cells"]})
    return {"preset": args.preset, "overrides": args.set, "controller": args.controller,
            "rounds": args.rounds, "steps": args.steps, "runs": runs,
            "command": common.command_line("graddrop-warmup", args.argv),
            "gradients": "seeded Gaussian float32, the preset model's trainable shapes",
            "machine": machine.describe()}


def speedup(cell: Dict[str, Any]) -> float:
    """The median over rounds of (allgather time / time with the fallback) in that round."""
    rounds = cell["rounds"]
    return statistics.median(a / f for a, f in zip(rounds["allgather"], rounds["fallback"]))


def table(result: Dict[str, Any]) -> str:
    """N, kept fraction, ms per exchange both ways and their ratio, bytes each rank sent."""
    head = ("| N | kept | R | fallback taken | ms allgather | ms with fallback | speed-up "
            "| MB sent: allgather / with fallback |")
    lines = [head, "|" + "---|" * 8]
    for run in result["runs"]:
        for c in run["cells"]:
            s, st = c["seconds"], c["stats"]
            lines.append(
                f"| {run['ranks']} | {c['kept']:g} | {c['drop_ratio']:.2f} "
                f"| {'yes' if st['fallback']['dense_fallback'] else 'no'} "
                f"| {1e3 * s['allgather']:.0f} | {1e3 * s['fallback']:.0f} "
                f"| {speedup(c):.2f}x "
                f"| {st['allgather']['sent_bytes'] / 1e6:.2f} / {st['fallback']['sent_bytes'] / 1e6:.2f} |")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The study's command line (also ``python -m experiments graddrop-warmup``)."""
    p = argparse.ArgumentParser(prog="python -m experiments graddrop-warmup",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--kept", default="1,0.75,0.5,0.3,0.1,0.01",
                   help="kept fractions (1 - drop ratio), comma list in (0, 1]")
    p.add_argument("--rounds", type=int, default=3, help="alternating timed rounds")
    p.add_argument("--steps", type=int, default=3, help="exchanges per variant and round")
    common.add_launch_args(p, out=common.results_path(__file__, "graddrop_warmup.json"), ranks="2,4", timeout=1800)
    return p


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The checked command line."""
    p = build_parser()
    args = p.parse_args(argv)
    args.argv = list(argv) if argv is not None else None
    try:
        args.kept = [float(k) for k in str(args.kept).split(",") if k.strip()]
    except ValueError:
        p.error(f"--kept: expected a comma list of numbers, got {args.kept!r}")
    if not args.kept or not all(0.0 < k <= 1.0 for k in args.kept):
        p.error(f"--kept: every fraction must be in (0, 1], got {args.kept}")
    if args.rounds < 1 or args.steps < 1:
        p.error("--rounds and --steps must be at least 1")
    if not args.worker and any(n < 2 for n in common.parse_ranks(args.ranks)):
        p.error("--ranks: the fallback needs at least 2 ranks")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the study (or, with ``--worker``, one rank of it)."""
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    common.refuse_existing([args.out], args.overwrite)
    result = measure(args)
    print("\n" + table(result))
    common.write_result(args.out, result, overwrite=args.overwrite)
    print(f"wrote {args.out}")
    return 0
