"""The model-compression experiment: log-quantised Transformer and LSTM on our corpus.

For each model kind it trains (or reuses) a float32 baseline, then measures on the test split:

* scaling: unscaled / max / optimised scale x biases fp32 or quantised x without / with re-training
  (4-bit log);
* bit sweep: 1, 2, 3, 4, 8 bits (optimised scale, fp32 biases): packed size, BLEU, delta BLEU,
  without and with re-training;
* fixed-point vs log at 4 bits, without and with re-training;
* fine-tune (from the baseline) vs from scratch, error feedback on / off (4-bit log);
* the deployable artefact: the 4-bit packed SavedModel of the fine-tuned model with error
  feedback, its size against the float32 export, and a fresh-process serving check.

Every BLEU of a quantised model is the BLEU of the weights as they would be packed (the re-trained
weights are quantised once more with the same policy; how many weights this moves, and by how much
relative to the tensor's largest value, is reported: ~0, up to a last-bit change of a re-fitted
scale). Sub-runs live under ``--work-dir`` and are reused when the script is run
again. Results go to ``--results`` (JSON, written atomically) and a table is printed.

    # the full experiment (hours on 2 CPU cores)
    python scripts/quantization_experiment.py --data-dir data_cache
    # end-to-end check on a toy corpus with tiny models (minutes; numbers meaningless)
    python scripts/quantization_experiment.py --tiny --work-dir /tmp/qexp --results /tmp/qexp/q.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import tf_nmt  # noqa: E402,F401
from tf_nmt.config import Config, load_config, preset  # noqa: E402
from tf_nmt.data.vocabulary import load_split  # noqa: E402
from tf_nmt.evaluation.bleu import corpus_bleu  # noqa: E402
from tf_nmt.evaluation.translate import make_translate_fn, translate_texts  # noqa: E402
from tf_nmt.quantization.packed_file import PackedModel  # noqa: E402
from tf_nmt.quantization.policy import QuantPolicy  # noqa: E402
from tf_nmt.quantization.quantize import model_weights, quantize_weights, size_report  # noqa: E402
from tf_nmt.training.trainer import load_trained_model, train, write_json_atomic  # noqa: E402

PRESETS = {"transformer": "quickstart", "gnmt": "gnmt-small"}
TINY = {"transformer": ["model.num_layers=1", "model.d_model=32", "model.num_heads=2", "model.ff_dim=64"],
        "gnmt": ["model.num_layers=2", "model.units=32"]}
TINY_COMMON = ["data.vocab_size=320", "data.batch_tokens=256", "train.peak_lr=0.003",
               "train.warmup_steps=10", "train.log_every=10"]
THESIS = {"transformer": -0.19, "gnmt": -0.06}  # 4-bit log + re-training, delta BLEU


class Experiment:
    """Trains, quantises and scores one model kind; caches sub-runs in ``work/<kind>/``."""

    def __init__(self, kind: str, args: argparse.Namespace) -> None:
        self.kind, self.args = kind, args
        self.work = Path(args.work_dir) / kind
        overrides = [f"data.data_dir={args.data_dir}"] + (TINY_COMMON + TINY[kind] if args.tiny else [])
        self.base_cfg = load_config(None, overrides + list(args.set), base=preset(PRESETS[kind]))
        pairs = load_split(Path(args.data_dir), "test")
        self.pairs = pairs[: args.eval_limit] if args.eval_limit else pairs
        self.fp32_bleu: Optional[float] = None

    def log(self, msg: str) -> None:
        print(f"[{self.kind}] {msg}", flush=True)

    def cfg(self, steps: int, *extra: str) -> Config:
        return load_config(None, [f"train.train_steps={steps}", f"train.steps_per_cycle={self.args.cycle}",
                                  *extra], base=self.base_cfg)

    def run(self, name: str, steps: int, *extra: str) -> Path:
        """Train (or resume / reuse) the sub-run ``name``."""
        run_dir = self.work / name
        start = time.perf_counter()
        train(self.cfg(steps, *extra), run_dir, log=lambda _m: None)
        self.log(f"run {name}: {steps} steps ({time.perf_counter() - start:.0f} s)")
        return run_dir

    def bleu(self, model, tokenizer, cfg: Config) -> float:
        fn = make_translate_fn(model, tokenizer, cfg.decode.beam_size, cfg.decode.length_penalty)
        hyps = translate_texts(fn, tokenizer, [s for s, _ in self.pairs], cfg.decode.batch_size)
        return float(corpus_bleu(hyps, [t for _, t in self.pairs]).score)

    def score(self, run_dir: Path, policy: Optional[QuantPolicy]) -> Dict[str, Any]:
        """BLEU of ``run_dir``'s weights, quantised with ``policy`` first (None: float32)."""
        model, tokenizer, cfg = load_trained_model(run_dir)
        row: Dict[str, Any] = {}
        if policy is not None:
            names, arrays = model_weights(model)
            entries = quantize_weights(names, arrays, policy)
            deq = [e.dequantize(policy) for e in entries]
            model.set_weights(deq)
            report = size_report(entries, policy, arrays)["total"]
            row.update(packed_bytes=report["stored_bytes"], fp32_bytes=report["fp32_bytes"],
                       size_ratio=round(report["ratio"], 3),
                       moved_by_packing=int(sum((a != b).sum() for a, b in zip(arrays, deq))),
                       max_relative_move=float(max((np.abs(a - b).max() / max(np.abs(a).max(), 1e-30)
                                                    for a, b in zip(arrays, deq) if a.size), default=0.0)))
        row["bleu"] = round(self.bleu(model, tokenizer, cfg), 2)
        if self.fp32_bleu is not None:
            row["delta_bleu"] = round(row["bleu"] - self.fp32_bleu, 2)
        return row

    def retrain(self, name: str, policy: QuantPolicy, feedback: bool = True, scratch: bool = False) -> Path:
        extra = [f"train.quantize_bits={policy.bits}", f"train.quantize_kind={policy.kind}",
                 f"train.quantize_scale={policy.scale}", f"train.quantize_biases={policy.quantize_biases}",
                 f"train.quantize_error_feedback={feedback}"]
        if scratch:
            return self.run(name, self.args.baseline_steps, *extra)
        return self.run(name, self.args.retrain_steps, *extra,
                        f"train.init_from={self.work / 'fp32'}", *self.args.finetune_set)

    def retrains(self, policy: QuantPolicy, scratch: bool = False) -> bool:
        """Whether this cell gets a re-training run: every cell with ``--retrain-scope all``;
        with ``main`` only fine-tuning of the deployed policy (4-bit log, optimised scale, fp32
        biases), so the key comparison fits in a shorter budget."""
        if scratch:
            return self.args.retrain_scope == "all"
        if not self.args.retrain_steps:
            return False
        return self.args.retrain_scope == "all" or policy == QuantPolicy(bits=4)

    def go(self) -> Dict[str, Any]:
        a = self.args
        result: Dict[str, Any] = {"preset": PRESETS[self.kind], "thesis_delta_bleu_4bit_retrained": THESIS[self.kind]}
        baseline = self.run("fp32", a.baseline_steps)
        result["fp32"] = self.score(baseline, None)
        self.fp32_bleu = result["fp32"]["bleu"]
        self.log(f"fp32 BLEU {self.fp32_bleu}")

        rows = []
        for scale in ("unscaled", "max", "optimised"):
            for biases in (False, True):
                policy = QuantPolicy(bits=4, scale=scale, quantize_biases=biases)
                row = {"scale": scale, "biases": "quantised" if biases else "fp32",
                       "no_retrain": self.score(baseline, policy)}
                if self.retrains(policy):
                    run = self.retrain(f"q4-log-{scale}-{'qb' if biases else 'fb'}", policy)
                    row["retrained"] = self.score(run, policy)
                rows.append(row)
                self.log(f"scale {scale}, biases {row['biases']}: {row}")
        result["scaling"] = rows

        sweep = []
        for bits in a.bits:
            policy = QuantPolicy(bits=bits)
            row = {"bits": bits, "no_retrain": self.score(baseline, policy)}
            if a.sweep_retrain and self.retrains(policy):
                row["retrained"] = self.score(self.retrain(f"q{bits}-log-optimised-fb", policy), policy)
            sweep.append(row)
            self.log(f"{bits} bits: {row}")
        result["bit_sweep"] = sweep

        kinds = []
        for kind in ("fixed", "log"):
            policy = QuantPolicy(bits=4, kind=kind)
            row = {"kind": kind, "no_retrain": self.score(baseline, policy)}
            if self.retrains(policy):
                row["retrained"] = self.score(self.retrain(f"q4-{kind}-optimised-fb", policy), policy)
            kinds.append(row)
        result["fixed_vs_log"] = kinds

        policy = QuantPolicy(bits=4)
        start_rows = []
        for scratch in (False, True):
            for feedback in (True, False):
                if not self.retrains(policy, scratch):
                    continue
                name = f"q4-{'scratch' if scratch else 'finetune'}-{'ef' if feedback else 'noef'}"
                run = self.retrain(name if scratch or not feedback else "q4-log-optimised-fb", policy,
                                   feedback, scratch)
                start_rows.append({"start": "scratch" if scratch else "fine-tune",
                                   "error_feedback": feedback, **self.score(run, policy)})
        result["start_x_feedback"] = start_rows
        if a.retrain_steps:
            result["export"] = self.export(self.work / "q4-log-optimised-fb", policy)
        return result

    def export(self, run_dir: Path, policy: QuantPolicy) -> Dict[str, Any]:
        """The 4-bit packed SavedModel vs the float32 export; served from a fresh process."""
        from tf_nmt.quantization.commands import export_sizes
        from tf_nmt.quantization.saved_model import export_packed_saved_model
        from tf_nmt.quickstart import SAMPLE_SENTENCES, serve_in_fresh_process

        model, tokenizer, cfg = load_trained_model(run_dir)
        names, arrays = model_weights(model)
        entries = quantize_weights(names, arrays, policy)
        model.set_weights([e.dequantize(policy) for e in entries])
        packed = PackedModel(policy, entries, cfg.to_dict(), tokenizer.model_proto)
        target = self.work / "export-q4"
        export_packed_saved_model(model, tokenizer, packed, target, cfg.decode.beam_size,
                                  cfg.decode.length_penalty, overwrite=True)
        sizes = export_sizes(model, tokenizer, target, cfg.decode.beam_size, cfg.decode.length_penalty)
        in_process = translate_texts(make_translate_fn(model, tokenizer, cfg.decode.beam_size,
                                                       cfg.decode.length_penalty), tokenizer, SAMPLE_SENTENCES)
        served = serve_in_fresh_process(target, SAMPLE_SENTENCES)
        sizes.update(path=str(target), fresh_process_matches_in_process=served == in_process,
                     fresh_process_samples=dict(zip(SAMPLE_SENTENCES, served)))
        self.log(f"export: {sizes['total_ratio']:.2f}x smaller in total, "
                 f"{sizes['variables_ratio']:.2f}x in variables; fresh process ok: {served == in_process}")
        return sizes


def print_tables(results: Dict[str, Any]) -> None:
    def cell(row: Dict[str, Any], key: str) -> str:
        r = row.get(key)
        return f"{r['bleu']:.2f} ({r['delta_bleu']:+.2f})" if r else "-"

    for kind, res in results["models"].items():
        print(f"\n## {kind}: fp32 BLEU {res['fp32']['bleu']:.2f} "
              f"(thesis, 4-bit log re-trained: {res['thesis_delta_bleu_4bit_retrained']:+.2f})")
        print("| scale | biases | 4-bit, no re-training | 4-bit, re-trained |\n|---|---|---|---|")
        for row in res["scaling"]:
            print(f"| {row['scale']} | {row['biases']} | {cell(row, 'no_retrain')} | {cell(row, 'retrained')} |")
        print("\n| bits | packed MB | ratio | BLEU (Δ), no re-training | BLEU (Δ), re-trained |\n|---|---|---|---|---|")
        for row in res["bit_sweep"]:
            nr = row["no_retrain"]
            print(f"| {row['bits']} | {nr['packed_bytes'] / 1e6:.2f} | {nr['size_ratio']:.2f}x | "
                  f"{cell(row, 'no_retrain')} | {cell(row, 'retrained')} |")
        print("\n| 4 bits | no re-training | re-trained |\n|---|---|---|")
        for row in res["fixed_vs_log"]:
            print(f"| {row['kind']} | {cell(row, 'no_retrain')} | {cell(row, 'retrained')} |")
        print("\n| start | error feedback | BLEU (Δ) |\n|---|---|---|")
        for row in res["start_x_feedback"]:
            print(f"| {row['start']} | {'on' if row['error_feedback'] else 'off'} | "
                  f"{row['bleu']:.2f} ({row['delta_bleu']:+.2f}) |")
        if "export" in res:
            e = res["export"]
            print(f"\n4-bit SavedModel: {e['packed_total_bytes'] / 1e6:.2f} MB vs {e['fp32_total_bytes'] / 1e6:.2f} MB "
                  f"({e['total_ratio']:.2f}x; variables {e['variables_ratio']:.2f}x); "
                  f"fresh process matches: {e['fresh_process_matches_in_process']}")


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default="data_cache")
    p.add_argument("--work-dir", default="runs/quantization")
    p.add_argument("--results", default="results/quantization.json")
    p.add_argument("--models", default="transformer,gnmt")
    p.add_argument("--baseline-steps", type=int, default=6000)
    p.add_argument("--retrain-steps", type=int, default=1000, help="fine-tuning steps (0: no re-training)")
    p.add_argument("--cycle", type=int, default=250, help="steps per checkpoint/validation cycle")
    p.add_argument("--bits", default="1,2,3,4,8")
    p.add_argument("--no-sweep-retrain", dest="sweep_retrain", action="store_false",
                   help="bit sweep without re-training (saves 5 runs per model)")
    p.add_argument("--retrain-scope", choices=("all", "main"), default="all",
                   help="all: re-train every cell and train from scratch; main: fine-tune only "
                        "4-bit log / optimised / fp32 biases (with and without error feedback)")
    p.add_argument("--eval-limit", type=int, default=0, help="only the first N test sentences")
    p.add_argument("--set", action="append", default=[], help="config override for every run")
    p.add_argument("--finetune-set", action="append", default=[],
                   help="extra override for the fine-tuning runs, e.g. train.peak_lr=3e-4")
    p.add_argument("--tiny", action="store_true",
                   help="toy corpus + tiny models + few steps: checks the pipeline end to end")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --results file")
    args = p.parse_args(argv)
    args.bits = [int(b) for b in args.bits.split(",")]
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    results_path = Path(args.results)
    if results_path.exists() and not args.overwrite:
        raise SystemExit(f"{results_path} exists; pass --overwrite to replace it")
    if args.tiny:
        from tests.helpers import write_toy_data_dir

        args.data_dir = str(write_toy_data_dir(Path(args.work_dir) / "toy-data"))
        args.baseline_steps, args.retrain_steps, args.cycle = 30, 10, 10
        args.eval_limit = args.eval_limit or 10
    start = time.perf_counter()
    results: Dict[str, Any] = {"command": " ".join(sys.argv), "tiny": args.tiny, "models": {},
                               "settings": {k: v for k, v in vars(args).items() if k != "overwrite"},
                               "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}}
    for kind in args.models.split(","):
        results["models"][kind] = Experiment(kind, args).go()
    results["minutes"] = round((time.perf_counter() - start) / 60, 1)
    print_tables(results)
    write_json_atomic(results_path, results)
    print(f"\nwrote {results_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
