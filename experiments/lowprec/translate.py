"""Translation speed with the log-space kernels (issue 16 item 3; thesis section 7.3.5).

One trained run whose matmul inputs are log-quantised (``train.quantize_activations_bits=4``,
ideally with ``--quantize-bits 4`` weights) translates the same sentences (beam search) with its
matmuls run by three engines of :mod:`tf_nmt.models.activation_quant`, alternating within each
round (the order rotates from round to round, since the machine is shared):

* ``fp32``: no activation quantisation, stock float32 matmuls (oneDNN) - the speed baseline;
* ``int8``: TensorFlow's stock 8-bit GEMM (``QuantizedMatMul``), weights quantised once,
  activations per call over the fixed range ``[-S, S]``;
* ``lowprec``: the log-space kernel (``shift16``: 4-bit codes, exponent adds in 16-bit lanes,
  exact int32 sums), weights encoded to codes once, activations per call.

It reports sentences/s per engine (median over rounds, and every round), the BLEU of each engine's
translations, and the BLEU of the emulated quantisation (what ``tf-nmt evaluate`` reports) that
the lowprec kernel reproduces up to float rounding. The results file is written only when every
round completed::

    python -m experiments lowprec-translate --run-dir RUN          # experiments/lowprec/results/lowprec_translate.json
    python -m experiments lowprec-translate --run-dir RUN --limit 50 --rounds 1 --out /tmp/lt.json
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from experiments.lib import common

ENGINES = ("fp32", "int8", "lowprec")


def translate_all(model, tokenizer, engine, beam: int, alpha: float, batch_size: int):
    """A translate function traced under ``engine`` (an ``activations`` engine instance)."""
    from tf_nmt.inference.serving_graph import make_translate_fn, translate_texts
    from tf_nmt.models.activation_quant import use_engine

    fn = make_translate_fn(model, tokenizer, beam, alpha)

    def run(texts: List[str]) -> List[str]:
        with use_engine(engine):  # the engine is read when fn is traced (first call)
            return translate_texts(fn, tokenizer, texts, batch_size)

    return run


def measure(run_dir: Path, data_dir: Optional[Path], split: str, limit: int, beam: int,
            batch_size: int, rounds: int, engines: Sequence[str],
            log=print) -> Dict[str, Any]:
    """Sentences/s and BLEU of each engine on ``split``; see the module docstring."""
    from tf_nmt.compat import tf
    from tf_nmt.data.data_dir import load_split
    from tf_nmt.evaluation.bleu import corpus_bleu
    from tf_nmt.ops import lowprec
    from tf_nmt.models.activation_quant import inference_engine
    from tf_nmt.run_dir import RunDir, load_trained_model
    from tf_nmt.training.checkpoints import step_of

    model, tokenizer, cfg = load_trained_model(run_dir)
    checkpoint = RunDir(Path(run_dir)).latest_checkpoint()
    trained_steps = step_of(checkpoint)  # ckpt-N is saved at step N, on either Keras
    pairs = load_split(Path(data_dir or cfg.data.data_dir), split)
    pairs = pairs[:limit] if limit else pairs
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    alpha = cfg.decode.length_penalty
    built = {name: inference_engine(model, name) for name in ("emulated", *engines)}
    runners = {name: translate_all(model, tokenizer, engine, beam, alpha, batch_size)
               for name, engine in built.items()}
    bleu: Dict[str, float] = {}
    hypotheses: Dict[str, List[str]] = {}
    for name, runner in runners.items():  # trace + one untimed pass: BLEU of every engine
        start = time.perf_counter()
        hypotheses[name] = runner(sources)
        bleu[name] = corpus_bleu(hypotheses[name], references).score
        log(f"{name:9s} BLEU {bleu[name]:6.2f}  (untimed first pass {time.perf_counter() - start:.1f} s)")
    seconds: Dict[str, List[float]] = {name: [] for name in engines}
    load_before = os.getloadavg()
    for r in range(rounds):
        order = list(engines[r % len(engines):]) + list(engines[:r % len(engines)])
        for name in order:
            start = time.perf_counter()
            out = runners[name](sources)
            seconds[name].append(time.perf_counter() - start)
            if out != hypotheses[name]:
                raise RuntimeError(f"{name}: translations changed between passes")
        log(f"round {r + 1}/{rounds}: " + ", ".join(
            f"{n} {len(sources) / seconds[n][-1]:.1f} sent/s" for n in engines))
    load_after = os.getloadavg()
    speed = {n: len(sources) / statistics.median(s) for n, s in seconds.items()}
    low = built.get("lowprec")
    q = model.activation_quantization
    return {
        "run_dir": str(run_dir), "split": split, "sentences": len(sources), "beam_size": beam,
        "length_penalty": alpha, "batch_size": batch_size, "rounds": rounds,
        "model_kind": cfg.model.kind, "model_hparams": cfg.model.hparams,
        "activation_quantization": q.to_dict() if q else None,
        "weight_bits": cfg.train.quantize_bits, "checkpoint": checkpoint,
        "trained_steps": trained_steps,
        "empty_translations": {n: sum(not h.strip() for h in hyps) for n, hyps in hypotheses.items()},
        "identical_to_emulated": {n: sum(a == b for a, b in zip(hyps, hypotheses["emulated"]))
                                  for n, hyps in hypotheses.items()},
        "sentences_per_s": speed,
        "speed_vs_fp32": {n: speed[n] / speed["fp32"] for n in speed} if "fp32" in speed else {},
        "seconds_per_round": seconds, "bleu": bleu,
        "lowprec_weights": ({"encoded_exactly": low.on_grid, "quantised_on_load": low.off_grid}
                            if low is not None else None),
        "lowprec_simd": lowprec.simd_available(),
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "cpu_count": os.cpu_count(), "machine": platform.machine(),
        "load_average_before": load_before, "load_average_after": load_after,
        "examples": [{"source": s, "reference": t, **{n: hypotheses[n][i] for n in hypotheses}}
                     for i, (s, t) in enumerate(pairs[:3])],
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run-dir", type=Path, required=True,
                   help="a run trained with train.quantize_activations_bits=4")
    p.add_argument("--data-dir", type=Path, help="prepared data (default: the run's data.data_dir)")
    p.add_argument("--split", default="test", choices=["train", "dev", "test"])
    p.add_argument("--limit", type=int, default=0, help="only the first N sentences (0: all)")
    p.add_argument("--beam-size", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--engines", default=",".join(ENGINES),
                   help=f"comma-separated, timed in this order, rotating (default {','.join(ENGINES)})")
    p.add_argument("--out", type=Path, default=common.results_path(__file__, "lowprec_translate.json"))
    args = p.parse_args(argv)
    engines = [e for e in args.engines.split(",") if e]
    from tf_nmt.errors import UsageError

    unknown = sorted(set(engines) - set(ENGINES) - {"emulated"})
    if unknown or not engines or args.rounds < 1:
        raise UsageError(f"--engines must name some of {ENGINES} (got {unknown or engines}) "
                         f"and --rounds must be >= 1")
    report = measure(args.run_dir, args.data_dir, args.split, args.limit, args.beam_size,
                     args.batch_size, args.rounds, engines)
    report["command"] = common.command_line("lowprec-translate", argv)
    common.write_result(args.out, report, overwrite=True)
    print(f"wrote {args.out}: " + ", ".join(
        f"{n} {s:.1f} sent/s (BLEU {report['bleu'][n]:.2f})" for n, s in report["sentences_per_s"].items()))
    return 0
