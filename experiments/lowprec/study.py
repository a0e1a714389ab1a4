"""Thesis Tables 7.4 and 7.5 for our models: quantised matmul inputs and log-space dot products.

Table 7.4 (per model kind: the quickstart Transformer and the gnmt-small LSTM), test BLEU of:

* ``fp32``: the float32 baseline (trained here, or reused from ``--work-dir``);
* ``fp32 fine-tuned``: the baseline trained ``--finetune-steps`` more in float32, the control that
  tells the effect of quantisation from the effect of more training;
* ``4-bit weights``: fine-tuned from the baseline for the same steps with 4-bit log weights
  (optimised scale, float32 biases, error feedback), scored as the packed model;
* ``+ dot products``: the same, with every matmul input log-quantised to 4 bits with a fixed
  scale (``train.quantize_activations_bits``, straight-through gradient), also fine-tuned from the
  baseline for the same steps. Its scale is fitted once on the baseline's matmul inputs
  (:func:`tf_nmt.models.activation_quant.calibrate_scale` on ``--calibration-batches`` dev
  batches) and then frozen, as the thesis's pre-determined scale. It is scored as the packed model
  with the emulated quantisation (what ``tf-nmt evaluate`` and the export compute) and with the
  matmuls run by the log-space kernels (what ``tf-nmt translate --lowprec`` runs).

Every fine-tune uses the same steps and ``--finetune-set`` overrides. Table 7.5 (ns per
128-element dot product: fp32, int8 VNNI, 4-bit log shift16 and lut8, and GFLOP/s-equivalent on
our matmul shapes) is measured by :mod:`.kernels` in the same invocation, after training (its
``tf.matmul`` column then runs in a subprocess, since TensorFlow's thread pools are fixed here).

Sub-runs live under ``--work-dir`` and are reused (or resumed) when the study is run again; the
results file is rewritten after each model kind, with ``complete`` false until all are done::

    python -m experiments lowprec --data-dir data_cache            # experiments/lowprec/results/lowprec.json (hours)
    python -m experiments lowprec --tiny --work-dir /tmp/lp --results /tmp/lp/lp.json
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence

from experiments.lib import common
from experiments.quantization import study as qstudy
from tf_nmt.utils import machine

# Thesis Table 7.4, test BLEU: fp32, 4-bit weights re-trained, + dot products re-trained.
THESIS_74 = {"transformer": (35.66, 35.47, 35.05), "gnmt": (34.28, 34.22, 33.12)}
ACTIVATION_BITS = 4
TARGET_COST = 1.5  # the bound: dot products cost at most this much BLEU over weights only


def calibrated_scale(experiment: qstudy.Experiment, baseline: Path, batches: int) -> float:
    """The fixed activation scale: the optimised log scale of the baseline's matmul inputs on
    ``batches`` dev batches (teacher-forced), frozen for training, evaluation and serving."""
    from tf_nmt.data.pipeline import encode_corpus, make_dataset
    from tf_nmt.data.data_dir import load_split
    from tf_nmt.models.activation_quant import ActivationQuantization, calibrate_scale
    from tf_nmt.run_dir import build_initialised_model, load_trained_model

    fp32, tokenizer, cfg = load_trained_model(baseline)
    probe = build_initialised_model(cfg.model.kind, tokenizer.vocab_size, cfg.model.hparams,
                                    activation_quantization=ActivationQuantization(ACTIVATION_BITS))
    probe.set_weights(fp32.get_weights())
    dev = encode_corpus(load_split(Path(experiment.args.data_dir), "dev"), tokenizer)
    data = make_dataset(dev, cfg.data.batch_tokens, cfg.data.max_length, shuffle=False,
                        repeat=False,
                        bucket_width=cfg.data.length_bucket_width)
    return calibrate_scale(probe, (features for features, _ in data.take(batches)),
                           ACTIVATION_BITS)


def kernel_check(experiment: qstudy.Experiment, run_dir: Path) -> Dict[str, Any]:
    """The packed run translated twice, with its matmuls emulated (what ``tf-nmt evaluate``
    computes) and in the log-space kernels (``--lowprec``): the kernels' test BLEU, how many
    translations the two engines agree on, and how many of each are empty."""
    from tf_nmt.evaluation.bleu import corpus_bleu
    from tf_nmt.inference.serving_graph import make_translate_fn, translate_texts
    from tf_nmt.models.activation_quant import inference_engine, use_engine
    from tf_nmt.commands.quantized_runs import model_from_packed, quantize_run

    packed, _ = quantize_run(run_dir, qstudy.DEPLOYED)
    model, tokenizer, cfg = model_from_packed(packed)
    sources = [s for s, _ in experiment.pairs]
    hyps: Dict[str, list] = {}
    for engine in ("emulated", "lowprec"):
        with use_engine(inference_engine(model, engine)):  # read when the function is traced
            fn = make_translate_fn(model, tokenizer, cfg.decode.beam_size, cfg.decode.length_penalty)
            hyps[engine] = translate_texts(fn, tokenizer, sources, cfg.decode.batch_size)
    score = corpus_bleu(hyps["lowprec"], [t for _, t in experiment.pairs]).score
    return {"kernel_bleu": round(float(score), 2),
            "kernel_identical_to_emulated": sum(
                a == b for a, b in zip(hyps["lowprec"], hyps["emulated"])),
            "empty_translations": {name: sum(not h.strip() for h in hs) for name, hs in hyps.items()},
            "sentences": len(sources),
            "examples": [{"source": src, "emulated": hyps["emulated"][i], "lowprec": hyps["lowprec"][i]}
                         for i, src in enumerate(sources[:3])]}


def table_74(kind: str, args: argparse.Namespace, log: Callable[[str], None]) -> Dict[str, Any]:
    """The four rows of Table 7.4 for ``kind``, with the thesis's figures beside them."""
    exp = qstudy.Experiment(kind, args)
    baseline = exp.run("fp32", args.baseline_steps)
    rows: Dict[str, Any] = {"fp32": exp.score(baseline, None)}
    exp.fp32_bleu = rows["fp32"]["bleu"]
    exp.log(f"fp32 BLEU {exp.fp32_bleu}")
    start = [f"train.init_from={baseline}", *args.finetune_set]
    control = exp.run("fp32-finetuned", args.finetune_steps, *start)
    rows["fp32_finetuned"] = exp.score(control, None)
    weights = qstudy.retrain_overrides(qstudy.DEPLOYED, feedback=True)
    q4w = exp.run("q4w", args.finetune_steps, *weights, *start)
    rows["weights_4bit"] = exp.score(q4w, qstudy.DEPLOYED)
    scale = calibrated_scale(exp, baseline, args.calibration_batches)
    exp.log(f"activation scale (fitted once on the baseline, then fixed): {scale:.6g}")
    q4wa = exp.run("q4w-a4", args.finetune_steps, *weights, *start,
                   f"train.quantize_activations_bits={ACTIVATION_BITS}",
                   f"train.quantize_activations_scale={scale!r}")
    rows["dot_products_4bit"] = {**exp.score(q4wa, qstudy.DEPLOYED),
                                 "activation_scale": scale,
                                 **kernel_check(exp, q4wa)}
    for name, row in rows.items():
        log(f"[{kind}] {name}: {row}")
    cost = round(rows["weights_4bit"]["bleu"] - rows["dot_products_4bit"]["bleu"], 2)
    thesis = THESIS_74[kind]
    return {"preset": qstudy.PRESETS[kind], "rows": rows,
            "dot_product_cost_bleu": cost, "within_target": cost <= TARGET_COST,
            "runs": {"fp32": str(baseline), "fp32_finetuned": str(control), "weights_4bit": str(q4w),
                     "dot_products_4bit": str(q4wa)},
            "thesis": {"fp32": thesis[0], "weights_4bit": thesis[1], "dot_products_4bit": thesis[2],
                       "dot_product_cost_bleu": round(thesis[1] - thesis[2], 2)}}


def format_table(results: Dict[str, Any]) -> str:
    """Table 7.4 as Markdown: ours (delta to fp32) beside the thesis's."""
    out = ["| model | row | test BLEU (ours) | Δ vs fp32 | thesis BLEU | thesis Δ |",
           "|---|---|---|---|---|---|"]
    names = [("fp32", "fp32"), ("fp32_finetuned", "fp32, fine-tuned (control)"),
             ("weights_4bit", "4-bit log weights, re-trained"),
             ("dot_products_4bit", "+ 4-bit log dot products, re-trained")]
    for kind, res in results["models"].items():
        base, thesis = res["rows"]["fp32"]["bleu"], res["thesis"]
        for key, label in names:
            row = res["rows"][key]
            t = thesis.get(key)
            out.append(f"| {kind} | {label} | {row['bleu']:.2f} | {row['bleu'] - base:+.2f} | "
                       + (f"{t:.2f} | {t - thesis['fp32']:+.2f} |" if t is not None else "- | - |"))
        dots = res["rows"]["dot_products_4bit"]
        out.append(f"| {kind} | (log-space kernels, same model) | {dots['kernel_bleu']:.2f} | "
                   f"{dots['kernel_bleu'] - base:+.2f} | | |")
    return "\n".join(out)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The study's command line (also ``python -m experiments lowprec``)."""
    p = argparse.ArgumentParser(prog="python -m experiments lowprec", description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default="data_cache")
    p.add_argument("--work-dir", default="runs/lowprec")
    p.add_argument("--results", default=str(common.results_path(__file__, "lowprec.json")))
    p.add_argument("--models", default="transformer,gnmt")
    p.add_argument("--baseline-steps", type=int, default=2000)
    p.add_argument("--finetune-steps", type=int, default=400,
                   help="steps of every fine-tune (the same budget for each row)")
    p.add_argument("--cycle", type=int, default=200, help="steps per checkpoint/validation cycle")
    p.add_argument("--calibration-batches", type=int, default=8,
                   help="dev batches whose matmul inputs fit the fixed activation scale")
    p.add_argument("--eval-limit", type=int, default=0, help="only the first N test sentences")
    p.add_argument("--set", action="append", default=[], help="config override for every run")
    p.add_argument("--finetune-set", action="append", default=[],
                   help="extra override for every fine-tune, e.g. train.peak_lr=7e-4")
    p.add_argument("--kernel-rounds", type=int, default=51,
                   help="alternating rounds of the Table 7.5 dot-product benchmark")
    p.add_argument("--tiny", action="store_true",
                   help="toy corpus + tiny models + few steps: checks the pipeline end to end")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --results file (needed to re-run into it)")
    args = p.parse_args(argv)
    for name in ("baseline_steps", "finetune_steps", "cycle", "calibration_batches"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    unknown = set(args.models.split(",")) - set(THESIS_74)
    if unknown:
        p.error(f"unknown model kind(s) {sorted(unknown)}: use {', '.join(THESIS_74)}")
    return args


def main(argv: Optional[Sequence[str]] = None,
         toy_data: Optional[Callable[[Path], Path]] = None) -> int:
    """Train and score Table 7.4 per model kind, then measure Table 7.5; write the results."""
    from experiments.lowprec import kernels as lowprec_bench

    args = parse_args(argv)
    path = Path(args.results)
    common.refuse_existing([path], args.overwrite)
    if args.tiny:
        args.data_dir = common.toy_data_dir(toy_data, args.work_dir, "python -m experiments lowprec")
        args.baseline_steps, args.finetune_steps, args.cycle = 30, 10, 10
        args.eval_limit, args.calibration_batches = args.eval_limit or 10, 2
        args.kernel_rounds = 3
    # quantization.Experiment reads these names
    args.retrain_steps, args.retrain_scope, args.sweep_retrain = args.finetune_steps, "main", False
    start = time.perf_counter()
    results: Dict[str, Any] = {
        "command": common.command_line("lowprec", argv), "tiny": args.tiny, "complete": False, "models": {},
        "settings": {k: v for k, v in vars(args).items() if k != "overwrite"},
        "machine": machine.describe()}
    for kind in args.models.split(","):
        results["models"][kind] = table_74(kind, args, print)
        results["minutes"] = round((time.perf_counter() - start) / 60, 1)
        common.write_result(path, results, overwrite=True)  # this invocation's own file
    print(format_table(results))
    results["table_7_5"] = lowprec_bench.run(
        rounds=args.kernel_rounds, matmul_rounds=3 if args.tiny else 9, tokens=64, pairs=16,
        target_s=0.0002, bursts=9)
    print(lowprec_bench.format_tables(results["table_7_5"]))
    results["complete"] = True
    results["minutes"] = round((time.perf_counter() - start) / 60, 1)
    common.write_result(path, results, overwrite=True)
    print(f"\nwrote {path}")
    return 0
