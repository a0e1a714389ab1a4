"""``own-corpus-resume``: resuming an own-corpus run at step 100k costs what resuming at step 1k
costs (issue 55; target: at most 1.2x the time, and under 60 s).

What a resume pays for its data is the time from building the trainer's stream
(:func:`tf_nmt.data.streaming.rank_stream`, rank ``--rank`` of ``--ranks``, the config's batch
plan, buffer and seed) at the step's recorded position to its first batch. For each of
``--steps`` the study computes the position equivalent to that step (data epoch, window, batch,
from the batches per window of the rank's first window and its windows per epoch) and times
``--repeats`` fresh streams started there (median). For comparison it also times the replay that
resumes did before (the stream from its start, ``skip(step)``) for the steps up to
``--replay-max``.

    python -m experiments own-corpus-resume                 # 5M-pair corpus, steps 1k and 100k
    python -m experiments own-corpus-resume --tiny          # 20k pairs, seconds
    python -m experiments own-corpus-resume --data-dir DATA --ranks 64
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from experiments.lib import common
from experiments.own_corpus import corpora

TARGET_RATIO, TARGET_SECONDS = 1.2, 60.0
TINY = {"pairs": 20_000, "vocab_size": 1000, "repeats": 2, "batch_tokens": 1024}


def first_batch_seconds(dataset: Any) -> float:
    """Seconds from asking ``dataset`` for an iterator to holding its first element."""
    start = time.perf_counter()
    next(iter(dataset))
    return time.perf_counter() - start


def measure(args: argparse.Namespace) -> Dict[str, Any]:
    from tf_nmt.data.prepared import read_prepared  # noqa: PLC0415 - TensorFlow on demand
    from tf_nmt.data.streaming import (BLOCKS_PER_WINDOW, StreamPosition, block_pairs,  # noqa: PLC0415
                                       rank_stream)

    load_before = [round(v, 2) for v in os.getloadavg()]
    work = Path(args.work_dir)
    if args.data_dir:
        data = Path(args.data_dir)
    else:
        corpora.ensure_prepared(work, args.pairs, args.vocab_size, args.seed, False)
        data = corpora.data_dir(work, args.pairs)
    cfg = common.study_config(args.preset, args.set, args.batch_tokens)
    d = cfg.data
    prepared = read_prepared(data)
    if not prepared.own:
        raise SystemExit(f"{data}: not an own corpus (no corpus/manifest.json)")
    blocks = prepared.rank_blocks(args.ranks, args.rank, block_pairs(d.shuffle_buffer))

    def stream(start: Any) -> Any:
        return rank_stream(blocks, d.batch_tokens, d.max_length, seed=d.shuffle_seed + args.rank,
                           shuffle_buffer=d.shuffle_buffer, bucket_width=d.length_bucket_width,
                           start=start)

    # the batches of the rank's first window, times its windows: the batches of an epoch
    per_window = sum(1 for _ in stream(StreamPosition()).take_while(lambda _b, p: p[1] == 0))
    windows = -(-len(blocks) // BLOCKS_PER_WINDOW)
    per_epoch = per_window * windows
    rows: List[Dict[str, Any]] = []
    for step in args.steps:
        epoch, rest = divmod(step, per_epoch)
        window, batch = divmod(rest, per_window)
        position = StreamPosition(epoch, window, batch)
        seek = [first_batch_seconds(stream(position)) for _ in range(args.repeats)]
        row = {"step": step, "position": [epoch, window, batch],
               "seek_seconds": seek, "seek_median": statistics.median(seek)}
        if step <= args.replay_max:
            replay = [first_batch_seconds(stream(StreamPosition()).skip(step))
                      for _ in range(args.repeats)]
            row.update(replay_seconds=replay, replay_median=statistics.median(replay))
        rows.append(row)
        print(f"step {step:,}: position {row['position']}, seek {row['seek_median']:.2f} s"
              + (f", replay {row['replay_median']:.2f} s" if "replay_median" in row else ""),
              flush=True)
    low, high = rows[0]["seek_median"], rows[-1]["seek_median"]
    ratio = high / low if low > 0 else float("inf")
    return {"command": common.command_line("own-corpus-resume", args.argv),
            "data_dir": str(data), "train_pairs": prepared.train_pairs, "ranks": args.ranks,
            "rank": args.rank, "rank_pairs": sum(b.count for b in blocks), "blocks": len(blocks),
            "batch_tokens": d.batch_tokens, "shuffle_buffer": d.shuffle_buffer,
            "batches_per_window": per_window, "windows_per_epoch": windows,
            "batches_per_epoch_estimate": per_epoch, "rows": rows,
            "ratio": ratio, "within_target": ratio <= TARGET_RATIO and high < TARGET_SECONDS,
            "load_before": load_before, "load_after": [round(v, 2) for v in os.getloadavg()]}


def format_table(result: Dict[str, Any]) -> str:
    lines = [f"resume of rank {result['rank']} of {result['ranks']} ({result['rank_pairs']:,} "
             f"pairs, ~{result['batches_per_epoch_estimate']:,} batches per data epoch)", "",
             "| step | position (epoch, window, batch) | seek to first batch (s) | replay (s) |",
             "|---:|---|---:|---:|"]
    for row in result["rows"]:
        replay = f"{row['replay_median']:.2f}" if "replay_median" in row else "not run"
        lines.append(f"| {row['step']:,} | {tuple(row['position'])} | {row['seek_median']:.2f} | "
                     f"{replay} |")
    lines += ["", f"last / first step's seek: {result['ratio']:.2f}x; target <= {TARGET_RATIO}x "
              f"and < {TARGET_SECONDS:g} s: {'met' if result['within_target'] else 'NOT met'}"]
    return "\n".join(lines)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m experiments own-corpus-resume",
                                description=__doc__.split("\n\n")[0])
    corpora.add_corpus_args(p)
    p.add_argument("--preset", default="transformer-base")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="config override (data.*)")
    p.add_argument("--batch-tokens", type=int, default=4096)
    p.add_argument("--ranks", type=int, default=1, help="the world size whose share is read")
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--steps", type=int, nargs="+", default=[1_000, 100_000],
                   help="resume steps, the first one the reference")
    p.add_argument("--repeats", type=int, default=3, help="fresh streams timed per step")
    p.add_argument("--replay-max", type=int, default=1_000,
                   help="time the old replay (skip) for steps up to this")
    corpora.add_study_args(p, "corpora and prepared data", "20k pairs, a 1000-piece vocabulary, "
                           "1,024-token batches, 2 repeats", "own_corpus_resume.json")
    args = p.parse_args(argv)
    args.argv = list(argv) if argv is not None else None
    corpora.apply_tiny(args, p, TINY)
    if not 0 <= args.rank < args.ranks:
        p.error(f"--rank must be in [0, {args.ranks})")
    if args.repeats < 1 or min(args.steps) < 1:
        p.error("--repeats and --steps must be >= 1")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    return corpora.run_study(parse_args(argv), __file__, "own_corpus_resume.json", measure,
                             format_table)
