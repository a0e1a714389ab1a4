"""``own-corpus-pipeline``: the streaming input pipeline keeps ahead of training (issue 44;
target: it delivers at least 5x the target tokens/s that the training step consumes).

Both rates are measured in one process, on the same prepared corpus (by default the 4.5M-pair
one of ``own-corpus-prepare``), the same batch plan and the same model:

- **pipeline**: the batches of :func:`tf_nmt.data.streaming.rank_stream` over the
  corpus's shards, built as the trainer builds them (rank 0 of 1, the config's shuffle buffer,
  length buckets and seed), a fresh iterator each round pulled as fast as it gives batches for
  ``--batches`` batches, its start (reading and shuffling the first window) included: the
  stream reads a window of pairs ahead while the current one is batched, so an iterator timed
  after a pause (the step's turn) would hand out batches already made, and a count short of a
  few windows would time the slicing of one window in memory. The default, 1,500 batches, is
  more than two windows of transformer-base's batches on the 4.5M corpus; the rate is a lower
  bound. Target tokens are the non-pad labels, as training counts them.
- **training step**: the preset's model, built and compiled as ``tf-nmt train`` does
  (:func:`tf_nmt.training.trainer.build_and_compile`), fitted on ``--cache-batches`` real
  batches of the same stream held in memory, so the pipeline costs nothing while the steps are
  timed: ``--steps`` steps timed from the end of the first to the end of the last, after a
  warm-up pass over the cached batches (tracing).

The two alternate ``--rounds`` times (pipeline, step, pipeline, step, ...); the ratio is the
median of the per-round ratios. The pipeline is timed alone, with every core to itself; during
training it shares them with the step, so the ratio is how much headroom the pipeline has, not
a promise that it never waits.

    python -m experiments own-corpus-pipeline               # 5M-pair corpus, 3 rounds
    python -m experiments own-corpus-pipeline --tiny        # 20k pairs, small batches, seconds
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from experiments.lib import common
from experiments.own_corpus import corpora
from tf_nmt.utils import machine

TARGET_RATIO = 5.0
TINY = {"pairs": 20_000, "vocab_size": 1000, "batches": 40, "steps": 3,
        "cache_batches": 4, "rounds": 2, "batch_tokens": 1024}


def target_tokens(labels: Any) -> int:
    """Non-pad target positions of a batch's labels (eos included, as training counts them)."""
    import numpy as np  # noqa: PLC0415

    return int(np.count_nonzero(np.asarray(labels)))


class Stream:
    """The training stream of a prepared data dir, built as the trainer builds it (rank 0 of 1)."""

    def __init__(self, data: Path, cfg: Any) -> None:
        from tf_nmt.data.prepared import read_prepared  # noqa: PLC0415 - TensorFlow on demand
        from tf_nmt.data.streaming import block_pairs, rank_stream  # noqa: PLC0415

        prepared = read_prepared(data)
        if not prepared.own:
            raise SystemExit(f"{data}: not an own corpus (no corpus/manifest.json)")
        self.prepared, self.cfg = prepared, cfg
        d = cfg.data
        blocks = prepared.rank_blocks(1, 0, block_pairs(d.shuffle_buffer))
        self.dataset = rank_stream(blocks, d.batch_tokens, d.max_length, seed=d.shuffle_seed,
                                   shuffle_buffer=d.shuffle_buffer,
                                   bucket_width=d.length_bucket_width).map(
                                       lambda batch, _position: batch)


def time_pipeline(dataset: Any, batches: int) -> Dict[str, float]:
    """Pull ``batches`` batches from a fresh iterator over ``dataset`` as fast as it gives
    them, its start included (the time to its first batch is recorded too)."""
    start = time.perf_counter()
    iterator = iter(dataset)
    pulled = [next(iterator)]
    first_batch_s = time.perf_counter() - start
    pulled += [next(iterator) for _ in range(batches - 1)]
    seconds = time.perf_counter() - start
    tokens = sum(target_tokens(labels) for _, labels in pulled)
    return {"seconds": seconds, "batches": batches, "target_tokens": tokens,
            "tgt_tok_per_s": tokens / seconds, "batches_per_s": batches / seconds,
            "first_batch_s": first_batch_s}


def step_clock() -> Any:
    """A Keras callback that records the time each training step ended (``.ends``)."""
    from tf_nmt.compat import keras  # noqa: PLC0415 - TensorFlow on demand

    class StepClock(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.ends: List[float] = []

        def on_train_batch_end(self, batch, logs=None) -> None:
            self.ends.append(time.perf_counter())
    return StepClock()


def in_memory(batches: Sequence[Any]) -> Any:
    """The batches as a repeated dataset held in memory (shapes vary: one trace, None dims)."""
    from tf_nmt.compat import tf  # noqa: PLC0415

    dataset = tf.data.Dataset.from_tensors(batches[0])
    for batch in batches[1:]:
        dataset = dataset.concatenate(tf.data.Dataset.from_tensors(batch))
    return dataset.repeat()


def time_steps(model: Any, cached: Any, counts: Sequence[int], steps: int) -> Dict[str, float]:
    """``steps`` + 1 training steps on the cached batches (step i on batch i mod len(counts)),
    timed from the end of the first step to the end of the last."""
    clock = step_clock()
    model.fit(cached, steps_per_epoch=steps + 1, epochs=1, verbose=0, callbacks=[clock])
    seconds = clock.ends[-1] - clock.ends[0]
    tokens = sum(counts[i % len(counts)] for i in range(1, steps + 1))
    return {"seconds": seconds, "steps": steps, "target_tokens": tokens,
            "tgt_tok_per_s": tokens / seconds, "s_per_step": seconds / steps}


def measure(args: argparse.Namespace) -> Dict[str, Any]:
    load_before = [round(v, 2) for v in os.getloadavg()]
    work = Path(args.work_dir)
    if args.data_dir:
        data = Path(args.data_dir)
    else:
        corpora.ensure_prepared(work, args.pairs, args.vocab_size, args.seed, args.gzip,
                                args.prepare_arg)
        data = corpora.data_dir(work, args.pairs)
    from tf_nmt.training.trainer import build_and_compile  # noqa: PLC0415

    cfg = common.study_config(args.preset, [f"data.data_dir={data}", *args.set], args.batch_tokens)
    stream = Stream(data, cfg)
    vocab = int(stream.prepared.vocab_size)
    cfg.data.vocab_size = vocab
    # The step's batches: real ones from a stream of its own, held in memory, repeated.
    batches = list(stream.dataset.take(args.cache_batches))
    counts = [target_tokens(labels) for _, labels in batches]
    cached = in_memory(batches)
    model = build_and_compile(cfg, vocab)
    policy = getattr(getattr(model, "dtype_policy", None), "name", None)
    time_steps(model, cached, counts, args.cache_batches)                   # tracing, warm-up
    rounds: List[Dict[str, Any]] = []
    for r in range(args.rounds):
        pipe = time_pipeline(stream.dataset, args.batches)
        step = time_steps(model, cached, counts, args.steps)
        rounds.append({"pipeline": pipe, "train": step,
                       "ratio": pipe["tgt_tok_per_s"] / step["tgt_tok_per_s"]})
        print(f"round {r + 1}/{args.rounds}: pipeline {pipe['tgt_tok_per_s']:,.0f} tgt tok/s, "
              f"training step {step['tgt_tok_per_s']:,.0f} tgt tok/s ({step['s_per_step']:.3f} "
              f"s/step): {rounds[-1]['ratio']:.1f}x", flush=True)
    ratio = statistics.median(r["ratio"] for r in rounds)
    d = cfg.data
    return {"what": "streaming input pipeline alone against the training step, target tokens/s, "
                    "alternating in one process",
            "command": common.command_line("own-corpus-pipeline", args.argv),
            "machine": machine.describe(load=True, load_before=load_before),
            "settings": {"data_dir": str(data), "train_pairs": stream.prepared.train_pairs,
                         "shards": len(stream.prepared.shards), "preset": args.preset,
                         "set": args.set, "vocab_size": vocab, "policy": policy,
                         "batch_tokens": d.batch_tokens, "max_length": d.max_length,
                         "length_bucket_width": d.length_bucket_width,
                         "shuffle_buffer": d.shuffle_buffer, "batches": args.batches,
                         "steps": args.steps,
                         "cache_batches": args.cache_batches, "rounds": args.rounds},
            "first_batch_s": statistics.median(r["pipeline"]["first_batch_s"] for r in rounds),
            "rounds": rounds,
            "pipeline_tgt_tok_per_s": statistics.median(r["pipeline"]["tgt_tok_per_s"] for r in rounds),
            "train_tgt_tok_per_s": statistics.median(r["train"]["tgt_tok_per_s"] for r in rounds),
            "ratio": ratio, "target_ratio": TARGET_RATIO, "within_target": ratio >= TARGET_RATIO}


def format_table(result: Mapping[str, Any]) -> str:
    s = result["settings"]
    lines = [f"{s['train_pairs']:,} pairs in {s['shards']} shards, {s['batch_tokens']}-token "
             f"batches, {s['preset']} ({s['policy']}), on {result['machine'].get('cpu')}; "
             f"first batch after {result['first_batch_s']:.1f} s", "",
             "| round | pipeline tgt tok/s | training step tgt tok/s | s/step | ratio |",
             "|---|---|---|---|---|"]
    for i, r in enumerate(result["rounds"]):
        lines.append(f"| {i + 1} | {r['pipeline']['tgt_tok_per_s']:,.0f} | "
                     f"{r['train']['tgt_tok_per_s']:,.0f} | {r['train']['s_per_step']:.3f} | "
                     f"{r['ratio']:.1f} |")
    lines += ["", f"pipeline / training step: {result['ratio']:.1f}x (median); target >= "
              f"{TARGET_RATIO:g}x: {'met' if result['within_target'] else 'NOT met'}"]
    return "\n".join(lines)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m experiments own-corpus-pipeline",
                                description=__doc__.split("\n\n")[0])
    corpora.add_corpus_args(p)
    p.add_argument("--gzip", action="store_true", help="give prepare-data gzipped input files")
    p.add_argument("--prepare-arg", action="append", default=[], metavar="ARG",
                   help="an extra prepare-data argument (as own-corpus-prepare)")
    p.add_argument("--preset", default="transformer-base")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="config override (model, precision, data.*)")
    p.add_argument("--batch-tokens", type=int, default=4096)
    p.add_argument("--batches", type=int, default=1500,
                   help="pipeline batches timed per round, from a fresh iterator")
    p.add_argument("--steps", type=int, default=20, help="training steps timed per round")
    p.add_argument("--cache-batches", type=int, default=20,
                   help="real batches held in memory for the training steps")
    p.add_argument("--rounds", type=int, default=3, help="alternating (pipeline, step) rounds")
    corpora.add_study_args(p, "corpora and prepared data",
                           "20k pairs, a 1000-piece vocabulary, 1,024-token batches, few steps",
                           "own_corpus_pipeline.json")
    args = p.parse_args(argv)
    args.argv = list(argv) if argv is not None else None
    corpora.apply_tiny(args, p, TINY, model=True)
    for name in ("batches", "steps", "cache_batches", "rounds"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    return corpora.run_study(parse_args(argv), __file__, "own_corpus_pipeline.json", measure, format_table)
