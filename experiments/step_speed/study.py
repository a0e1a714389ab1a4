"""The training step alone, on fixed-shape batches: what compilation and precision do to its
speed, and where its time goes (issue 17: speed work led by profiles).

``train-speed`` times whole training processes on real, bucketed data. This study isolates the
compiled step: every variant is its own model and optimizer (the preset with the variant's
overrides) in one process, stepped with ``train_on_batch`` on batches of fixed shapes, so XLA
compiles each shape once and the input pipeline plays no part. Token ids are random (a step's
cost does not depend on which ids it sees); every position is a real token.

Variants: ``fp32`` and ``bf16`` (tf-nmt's defaults), ``fp32-tfloss`` (the loss composed of TF
ops, ``train.loss_kernel=tf``, instead of the fused C++ kernel), ``fp32-tfdrop`` (Keras's
dropout, ``train.dropout_kernel=tf``, instead of the seeded C++ op), ``fp32-tfnorm`` and
``bf16-tfnorm`` (Keras's layer norm, ``train.norm_kernel=tf``, instead of the fused C++ op),
``fp32-tf`` (all three TensorFlow kernels) and
``-xla`` (Keras ``jit_compile``; XLA cannot compile custom ops, so these use the TF ones).

Each round times ``--steps`` steps of every (shape, variant), the variants in rotated order, after
two untimed steps per shape and variant (tracing, XLA compilation). A variant's speed is its
median over rounds; its ratio to the first variant is the median of the per-round ratios.

``--profile`` traces ``--profile-steps`` steps of every variant at the first shape with the TF
profiler (:mod:`experiments.step_speed.op_profile`) and records the op time per step by op
type, the matmuls' share of it, and the top op types.

    python -m experiments step-speed                                   # experiments/step_speed/results/step_speed.json
    python -m experiments step-speed --variants fp32,fp32-xla --shapes 64x32 --rounds 1 --out /tmp/s.json
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from experiments.lib import common
from tf_nmt.utils import machine

FP32, BF16, XLA = "train.mixed_precision=false", "train.mixed_precision=true", "train.jit_compile=true"
VARIANTS: Dict[str, Sequence[str]] = {
    "fp32": [FP32],
    "fp32-tfloss": [FP32, "train.loss_kernel=tf"],
    "fp32-tfdrop": [FP32, "train.dropout_kernel=tf"],
    "fp32-tfnorm": [FP32, "train.norm_kernel=tf"],
    "fp32-tf": [FP32, "train.loss_kernel=tf", "train.dropout_kernel=tf", "train.norm_kernel=tf"],
    "fp32-xla": [FP32, XLA],
    "bf16": [BF16],
    "bf16-tfnorm": [BF16, "train.norm_kernel=tf"],
    "bf16-xla": [BF16, XLA],
}
Shape = Tuple[int, int]


def parse_shapes(text: str) -> List[Shape]:
    """``"128x32,64x64"`` -> [(128, 32), (64, 64)]: sentences x tokens (source and target)."""
    shapes: List[Shape] = []
    for item in text.split(","):
        parts = item.strip().lower().split("x")
        if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise ValueError(f"shape {item!r}: expected SENTENCESxTOKENS, e.g. 128x32")
        shapes.append((int(parts[0]), int(parts[1])))
    if len(set(shapes)) != len(shapes):
        raise ValueError(f"repeated shape in {text!r}")
    return shapes


def random_batch(shape: Shape, vocab_size: int, seed: int) -> Tuple[Dict[str, Any], Any]:
    """One ``({"source", "target_in"}, target_out)`` batch of random non-special ids."""
    import numpy as np

    from tf_nmt.data.tokenizer import EOS_ID

    rng = np.random.default_rng(seed)
    ids = lambda: rng.integers(EOS_ID + 1, vocab_size, shape).astype(np.int32)  # noqa: E731
    return {"source": ids(), "target_in": ids()}, ids()


def build_steppers(names: Sequence[str], preset_name: str, overrides: Sequence[str],
                   vocab_size: int) -> Dict[str, Any]:
    """A compiled model per variant (its own optimizer and dtype policy)."""
    from tf_nmt.training.trainer import build_and_compile

    models = {}
    for name in names:
        cfg = common.study_config(preset_name, [*overrides, *VARIANTS[name]], batch_tokens=4096)
        models[name] = build_and_compile(cfg, vocab_size)
    return models


def time_steps(step: Callable[[], Any], steps: int) -> float:
    """Seconds per call of ``step`` over ``steps`` calls."""
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps


def summarise(samples: Mapping[str, Mapping[str, List[float]]], shapes: Sequence[Shape],
              baseline: str) -> Dict[str, Dict[str, Any]]:
    """Per shape and variant: median s/step and target tok/s, and the median per-round ratio
    of its tok/s to ``baseline``'s (``samples[shape][variant]`` lists s/step per round)."""
    out: Dict[str, Dict[str, Any]] = {}
    for shape in shapes:
        key = f"{shape[0]}x{shape[1]}"
        tokens = shape[0] * shape[1]
        rows: Dict[str, Any] = {}
        for name, times in samples[key].items():
            rows[name] = {"s_per_step": statistics.median(times),
                          "tgt_tok_per_s": tokens / statistics.median(times),
                          "x_baseline": statistics.median(b / t for t, b in
                                                          zip(times, samples[key][baseline])),
                          "rounds_s_per_step": list(times)}
        out[key] = rows
    return out


def format_table(summary: Mapping[str, Mapping[str, Any]], baseline: str) -> str:
    """The shapes x variants as a Markdown table."""
    lines = [f"| shape | variant | s/step | target tok/s | x {baseline} |", "|---|---|---|---|---|"]
    for key, rows in summary.items():
        for name, row in rows.items():
            lines.append(f"| {key} | {name} | {row['s_per_step']:.3f} | "
                         f"{row['tgt_tok_per_s']:,.0f} | {row['x_baseline']:.2f} |")
    return "\n".join(lines)


def format_profile(profiles: Mapping[str, Mapping[str, Any]], top: int = 8) -> str:
    """Each variant's top op types (ms per step and share of op time) as a Markdown table."""
    lines = ["| variant | wall s/step | op s/step | matmul share | top op types (ms/step, share) |",
             "|---|---|---|---|---|"]
    for name, p in profiles.items():
        ops = ", ".join(f"{o['op']} {o['s_per_step'] * 1e3:.0f} ({o['share']:.0%})"
                        for o in p["top"][:top])
        lines.append(f"| {name} | {p['wall_s_per_step']:.3f} | {p['op_s_per_step']:.3f} | "
                     f"{p['matmul_share']:.0%} | {ops} |")
    return "\n".join(lines)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m experiments step-speed",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="quickstart")
    p.add_argument("--set", action="append", default=[], help="config override for every variant")
    p.add_argument("--variants", default="fp32,fp32-tfloss,fp32-xla,bf16,bf16-xla",
                   help=f"comma-separated, from {', '.join(VARIANTS)}; the first is the baseline")
    p.add_argument("--shapes", default="128x32,64x64,256x16",
                   help="SENTENCESxTOKENS batches (the quickstart's 4,096-token budget by default)")
    p.add_argument("--vocab-size", type=int, default=None,
                   help="output vocabulary (default: the config's data.vocab_size)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=8, help="timed steps per shape, variant and round")
    p.add_argument("--profile", action="store_true",
                   help="also trace every variant at the first shape with the TF profiler")
    p.add_argument("--profile-steps", type=int, default=3)
    p.add_argument("--out", default=str(common.results_path(__file__, "step_speed.json")))
    p.add_argument("--overwrite", action="store_true")
    args = p.parse_args(argv)
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown or not args.variants:
        p.error(f"unknown variant(s) {unknown}: use {', '.join(VARIANTS)}")
    if len(set(args.variants)) != len(args.variants):
        p.error("--variants lists a variant twice")
    try:
        args.shapes = parse_shapes(args.shapes)
    except ValueError as e:
        p.error(str(e))
    for name in ("rounds", "steps", "profile_steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.profile_steps != p.get_default("profile_steps") and not args.profile:
        p.error("--profile-steps is read only with --profile")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    common.refuse_existing([args.out], args.overwrite)
    from experiments.step_speed import op_profile

    cfg = common.study_config(args.preset, args.set, batch_tokens=4096)
    vocab = args.vocab_size or cfg.data.vocab_size
    load_before = [round(v, 2) for v in os.getloadavg()]
    models = build_steppers(args.variants, args.preset, args.set, vocab)
    batches = {shape: random_batch(shape, vocab, seed=i) for i, shape in enumerate(args.shapes)}

    def stepper(name: str, shape: Shape) -> Callable[[], Any]:
        return lambda: models[name].train_on_batch(*batches[shape])

    for shape in args.shapes:
        for name in args.variants:
            warm = time_steps(stepper(name, shape), 2) * 2
            print(f"warm-up {shape[0]}x{shape[1]} {name}: {warm:.1f} s", flush=True)
    samples: Dict[str, Dict[str, List[float]]] = {
        f"{b}x{t}": {n: [] for n in args.variants} for b, t in args.shapes}
    for r in range(args.rounds):
        k = r % len(args.variants)
        order = args.variants[k:] + args.variants[:k]
        for shape in args.shapes:
            for name in order:
                s = time_steps(stepper(name, shape), args.steps)
                samples[f"{shape[0]}x{shape[1]}"][name].append(s)
                print(f"round {r + 1}/{args.rounds} {shape[0]}x{shape[1]} {name}: {s:.3f} s/step",
                      flush=True)
    summary = summarise(samples, args.shapes, args.variants[0])
    profiles: Dict[str, Any] = {}
    if args.profile:
        for name in args.variants:
            traced = op_profile.trace(stepper(name, args.shapes[0]), args.profile_steps)
            profiles[name] = {"wall_s_per_step": traced["wall_s_per_step"],
                              **op_profile.summarise_ops(traced["op_s_per_step"])}
    result = {"what": "the training step alone on fixed-shape random batches, variants "
                      "alternating in one process",
              "command": common.command_line("step-speed", argv),
              "machine": machine.describe(load=True, load_before=load_before),
              "settings": {"preset": args.preset, "set": args.set, "vocab_size": vocab,
                           "variants": {n: list(VARIANTS[n]) for n in args.variants},
                           "shapes": [f"{b}x{t}" for b, t in args.shapes],
                           "rounds": args.rounds, "steps": args.steps,
                           "profile_steps": args.profile_steps if args.profile else None},
              "baseline": args.variants[0], "shapes": summary, "profiles": profiles}
    print(format_table(summary, args.variants[0]))
    if profiles:
        print(format_profile(profiles))
    common.write_result(args.out, result, overwrite=args.overwrite)
    print(f"wrote {args.out}")
    return 0
