"""The model-compression experiment: log-quantised Transformer and GNMT on our corpus.

For each model kind it trains (or reuses) a float32 baseline, or takes a trained run as it
(``--baseline-run KIND=DIR``, e.g. the quickstart's), then measures on the test split:

* scaling: unscaled / max / optimised scale x biases fp32 or quantised x without / with re-training
  (4-bit log);
* bit sweep: 1, 2, 3, 4, 8 bits (optimised scale, fp32 biases): packed size, BLEU, delta BLEU,
  without and with re-training;
* fixed-point vs log at 4 bits, without and with re-training;
* fine-tune (from the baseline) vs from scratch, error feedback on / off (4-bit log);
* the fair reference: the float32 baseline fine-tuned as long as the re-trained models (it has
  seen as many more batches);
* the deployable artefact: the 4-bit packed SavedModel of the fine-tuned model with error
  feedback, its size against the float32 export, and a fresh-process serving check.

Every BLEU of a quantised model is the BLEU of the packed model
(:func:`tf_nmt.commands.quantized_runs.quantize_run`, rebuilt by ``model_from_packed``): re-trained
weights are quantised once more with the same policy; how many weights this moves, and by how
much relative to the tensor's largest value, is reported (~0, up to a last-bit change of a
re-fitted scale). Sub-runs live under ``--work-dir`` and are reused when the study is run again.
Results go to ``--results`` (JSON, written atomically) and a table is printed. ``--update``
adds or replaces the listed models' entries in an existing results file and keeps the others;
each entry records its own command, settings and machine.

    # the full experiment (hours on 2 CPU cores)
    python -m experiments quantization --data-dir data_cache
    # end-to-end check on a toy corpus with tiny models (minutes; numbers meaningless)
    python -m experiments quantization --tiny --work-dir /tmp/qexp --results /tmp/qexp/q.json

(``--tiny`` takes its toy corpus from the test helpers, so it runs from the script in a source
checkout.)
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from tf_nmt.compat import keras
from tf_nmt.config import Config, load_config, preset
from tf_nmt.data.tokenizer import SubwordTokenizer
from tf_nmt.data.data_dir import load_split
from tf_nmt.evaluation.bleu import corpus_bleu
from tf_nmt.inference.serving_graph import make_translate_fn, translate_texts
from tf_nmt.commands.quantize import export_sizes
from tf_nmt.quantization.policy import QuantPolicy
from tf_nmt.quantization.quantize import model_weights
from tf_nmt.commands.quantized_runs import model_from_packed, quantize_run
from tf_nmt.export.packed_saved_model import export_packed_saved_model
from tf_nmt.commands.quickstart import SAMPLE_SENTENCES, serve_in_fresh_process
from experiments.lib import common
from tf_nmt.run_dir import RunDir, load_trained_model
from tf_nmt.training.trainer import train
from tf_nmt.utils import machine

PRESETS = {"transformer": "quickstart", "gnmt": "gnmt-small"}
# gnmt-small's step_decay has no warm-up: train.warmup_steps would be ignored (and is refused)
TINY = {"transformer": ["model.num_layers=1", "model.d_model=32", "model.num_heads=2", "model.ff_dim=64",
                        "train.warmup_steps=10"],
        "gnmt": ["model.num_layers=2", "model.units=32"]}
TINY_COMMON = ["data.vocab_size=320", "data.batch_tokens=256", "train.peak_lr=0.003",
               "train.log_every=10"]
THESIS = {"transformer": -0.19, "gnmt": -0.06}  # 4-bit log + re-training, delta BLEU
DEPLOYED = QuantPolicy(bits=4)  # 4-bit log, optimised scale, float32 biases


def check_baseline_run(run_dir: Path, cfg: Config) -> None:
    """SystemExit unless ``run_dir`` is a trained run of ``cfg``'s model (kind and shape), so
    that the quantised and fine-tuned models are the model the study says they are."""
    run = RunDir(run_dir)
    if not run.config_path.is_file() or run.latest_checkpoint() is None:
        raise SystemExit(f"--baseline-run {run_dir}: not a trained tf-nmt run (no config.yaml or "
                         f"no checkpoint)")
    trained = load_config(run.config_path).model
    if (trained.kind, dict(trained.hparams)) != (cfg.model.kind, dict(cfg.model.hparams)):
        raise SystemExit(f"--baseline-run {run_dir}: it trained {trained.kind} "
                         f"{dict(trained.hparams)}, the study's model is {cfg.model.kind} "
                         f"{dict(cfg.model.hparams)} (give the same --set)")


def retrains(args: argparse.Namespace, policy: QuantPolicy, scratch: bool = False) -> bool:
    """Whether a cell gets a re-training run: every cell with ``--retrain-scope all``; with
    ``main`` only fine-tuning of the deployed policy, so the key comparison fits a shorter
    budget. No fine-tuning at all with ``--retrain-steps 0``."""
    if scratch:
        return args.retrain_scope == "all"
    if not args.retrain_steps:
        return False
    return args.retrain_scope == "all" or policy == DEPLOYED


def retrain_overrides(policy: QuantPolicy, feedback: bool) -> List[str]:
    """The ``train.quantize_*`` overrides that re-train under ``policy``."""
    return [f"train.quantize_bits={policy.bits}", f"train.quantize_kind={policy.kind}",
            f"train.quantize_scale={policy.scale}", f"train.quantize_biases={policy.quantize_biases}",
            f"train.quantize_error_feedback={feedback}"]


def packing_moves(original: Sequence[np.ndarray], packed: Sequence[np.ndarray]) -> Dict[str, Any]:
    """How many weights packing changed, and the largest change relative to its tensor's
    largest magnitude (both ~0 for weights re-trained on the same grid)."""
    moved = int(sum((a != b).sum() for a, b in zip(original, packed)))
    rel = max((np.abs(a - b).max() / max(np.abs(a).max(), 1e-30)
               for a, b in zip(original, packed) if a.size), default=0.0)
    return {"moved_by_packing": moved, "max_relative_move": float(rel)}


class Experiment:
    """Trains, quantises and scores one model kind; caches sub-runs in ``work/<kind>/``."""

    def __init__(self, kind: str, args: argparse.Namespace,
                 baseline_run: Optional[str] = None) -> None:
        """``baseline_run``: a trained run to take as the float32 baseline (else one is trained
        in ``work/<kind>/fp32``)."""
        self.kind, self.args = kind, args
        self.work = Path(args.work_dir) / kind
        overrides = [f"data.data_dir={args.data_dir}"] + (TINY_COMMON + TINY[kind] if args.tiny else [])
        self.base_cfg = load_config(None, overrides + list(args.set), base=preset(PRESETS[kind]))
        self.given_baseline = baseline_run is not None
        self.baseline = Path(baseline_run) if baseline_run else self.work / "fp32"
        if self.given_baseline:
            check_baseline_run(self.baseline, self.base_cfg)
        pairs = load_split(Path(args.data_dir), "test")
        self.pairs = pairs[: args.eval_limit] if args.eval_limit else pairs
        self.fp32_bleu: Optional[float] = None

    def log(self, msg: str) -> None:
        """A progress line tagged with the model kind."""
        print(f"[{self.kind}] {msg}", flush=True)

    def run(self, name: str, steps: int, *extra: str) -> Path:
        """Train (or resume / reuse) the sub-run ``name``."""
        run_dir = self.work / name
        cfg = load_config(None, [f"train.train_steps={steps}",
                                 f"train.steps_per_cycle={self.args.cycle}", *extra],
                          base=self.base_cfg)
        start = time.perf_counter()
        train(cfg, run_dir, log=lambda _m: None)
        self.log(f"run {name}: {steps} steps ({time.perf_counter() - start:.0f} s)")
        return run_dir

    def bleu(self, model: keras.Model, tokenizer: SubwordTokenizer, cfg: Config) -> float:
        """Test BLEU of an in-memory model (the first ``--eval-limit`` sentences)."""
        fn = make_translate_fn(model, tokenizer, cfg.decode.beam_size, cfg.decode.length_penalty)
        hyps = translate_texts(fn, tokenizer, [s for s, _ in self.pairs], cfg.decode.batch_size)
        return float(corpus_bleu(hyps, [t for _, t in self.pairs]).score)

    def score(self, run_dir: Path, policy: Optional[QuantPolicy]) -> Dict[str, Any]:
        """BLEU of ``run_dir``'s weights, packed with ``policy`` first (None: float32)."""
        model, tokenizer, cfg = load_trained_model(run_dir)
        row: Dict[str, Any] = {}
        if policy is not None:
            original = model_weights(model)[1]
            packed, report = quantize_run(run_dir, policy)
            model, tokenizer, cfg = model_from_packed(packed)
            total = report["total"]
            row.update(packed_bytes=total["stored_bytes"], fp32_bytes=total["fp32_bytes"],
                       size_ratio=round(total["ratio"], 3),
                       **packing_moves(original, model_weights(model)[1]))
        row["bleu"] = round(self.bleu(model, tokenizer, cfg), 2)
        if self.fp32_bleu is not None:
            row["delta_bleu"] = round(row["bleu"] - self.fp32_bleu, 2)
        return row

    def retrain(self, name: str, policy: QuantPolicy, feedback: bool = True,
                scratch: bool = False) -> Path:
        """Re-train under ``policy``: fine-tuned from the baseline, or from scratch."""
        extra = retrain_overrides(policy, feedback)
        if scratch:
            return self.run(name, self.args.baseline_steps, *extra)
        return self.finetune(name, *extra)

    def finetune(self, name: str, *extra: str) -> Path:
        """``--retrain-steps`` from the float32 baseline's weights, with ``--finetune-set``."""
        return self.run(name, self.args.retrain_steps, *extra,
                        f"train.init_from={self.baseline}", *self.args.finetune_set)

    def cells(self, baseline: Path, policies: Sequence[Tuple[Dict[str, Any], QuantPolicy, str]],
              retrain: bool = True) -> List[Dict[str, Any]]:
        """One row per (labels, policy, re-training run name): BLEU without and, where the
        scope asks for it, with re-training."""
        rows = []
        for labels, policy, name in policies:
            row = {**labels, "no_retrain": self.score(baseline, policy)}
            if retrain and retrains(self.args, policy):
                row["retrained"] = self.score(self.retrain(name, policy), policy)
            rows.append(row)
            self.log(f"{labels}: {row}")
        return rows

    def go(self) -> Dict[str, Any]:
        """Every table of the experiment for this model kind."""
        a = self.args
        result: Dict[str, Any] = {"preset": PRESETS[self.kind],
                                  "thesis_delta_bleu_4bit_retrained": THESIS[self.kind]}
        baseline = self.baseline
        if self.given_baseline:
            result["baseline_run"] = str(baseline)
            self.log(f"float32 baseline: the trained run {baseline}")
        else:
            self.run("fp32", a.baseline_steps)
        result["fp32"] = self.score(baseline, None)
        self.fp32_bleu = result["fp32"]["bleu"]
        self.log(f"fp32 BLEU {self.fp32_bleu}")
        if a.retrain_steps:  # the fair reference for every re-trained cell
            result["fp32_finetuned"] = self.score(self.finetune("fp32-finetune"), None)
        result["scaling"] = self.cells(baseline, [
            ({"scale": scale, "biases": "quantised" if biases else "fp32"},
             QuantPolicy(bits=4, scale=scale, quantize_biases=biases),
             f"q4-log-{scale}-{'qb' if biases else 'fb'}")
            for scale in ("unscaled", "max", "optimised") for biases in (False, True)])
        result["bit_sweep"] = self.cells(baseline, [
            ({"bits": bits}, QuantPolicy(bits=bits), f"q{bits}-log-optimised-fb")
            for bits in a.bits], retrain=a.sweep_retrain)
        result["fixed_vs_log"] = self.cells(baseline, [
            ({"kind": kind}, QuantPolicy(bits=4, kind=kind), f"q4-{kind}-optimised-fb")
            for kind in ("fixed", "log")])
        start_rows = []
        for scratch in (False, True):
            for feedback in (True, False):
                if not retrains(a, DEPLOYED, scratch):
                    continue
                name = f"q4-{'scratch' if scratch else 'finetune'}-{'ef' if feedback else 'noef'}"
                run = self.retrain(name if scratch or not feedback else "q4-log-optimised-fb",
                                   DEPLOYED, feedback, scratch)
                start_rows.append({"start": "scratch" if scratch else "fine-tune",
                                   "error_feedback": feedback, **self.score(run, DEPLOYED)})
        result["start_x_feedback"] = start_rows
        if a.retrain_steps:
            result["export"] = self.export(self.work / "q4-log-optimised-fb", DEPLOYED)
        return result

    def export(self, run_dir: Path, policy: QuantPolicy) -> Dict[str, Any]:
        """The packed SavedModel vs the float32 export; served from a fresh process."""
        packed, _ = quantize_run(run_dir, policy)
        model, tokenizer, cfg = model_from_packed(packed)
        beam, alpha = cfg.decode.beam_size, cfg.decode.length_penalty
        target = export_packed_saved_model(model, tokenizer, packed, self.work / "export-q4", beam,
                                           alpha, overwrite=True)
        sizes = export_sizes(model, tokenizer, target, beam, alpha)
        in_process = translate_texts(make_translate_fn(model, tokenizer, beam, alpha), tokenizer,
                                     SAMPLE_SENTENCES)
        served = serve_in_fresh_process(target, SAMPLE_SENTENCES)
        sizes.update(path=str(target), fresh_process_matches_in_process=served == in_process,
                     fresh_process_samples=dict(zip(SAMPLE_SENTENCES, served)))
        self.log(f"export: {sizes['total_ratio']:.2f}x smaller in total, "
                 f"{sizes['variables_ratio']:.2f}x in variables; fresh process ok: {served == in_process}")
        return sizes


def _cell(row: Dict[str, Any], key: str) -> str:
    r = row.get(key)
    return f"{r['bleu']:.2f} ({r['delta_bleu']:+.2f})" if r else "-"


def tables(results: Dict[str, Any]) -> str:
    """The experiment's Markdown tables, per model kind."""
    out: List[str] = []
    for kind, res in results["models"].items():
        out.append(f"\n## {kind}: fp32 BLEU {res['fp32']['bleu']:.2f} "
                   f"(thesis, 4-bit log re-trained: {res['thesis_delta_bleu_4bit_retrained']:+.2f})")
        if "fp32_finetuned" in res:
            out.append(f"float32 fine-tuned as long as the re-trained models: "
                       f"{_cell(res, 'fp32_finetuned')}")
        out.append("| scale | biases | 4-bit, no re-training | 4-bit, re-trained |\n|---|---|---|---|")
        out += [f"| {row['scale']} | {row['biases']} | {_cell(row, 'no_retrain')} | "
                f"{_cell(row, 'retrained')} |" for row in res["scaling"]]
        out.append("\n| bits | packed MB | ratio | BLEU (Δ), no re-training | BLEU (Δ), re-trained |"
                   "\n|---|---|---|---|---|")
        out += [f"| {row['bits']} | {row['no_retrain']['packed_bytes'] / 1e6:.2f} | "
                f"{row['no_retrain']['size_ratio']:.2f}x | {_cell(row, 'no_retrain')} | "
                f"{_cell(row, 'retrained')} |" for row in res["bit_sweep"]]
        out.append("\n| 4 bits | no re-training | re-trained |\n|---|---|---|")
        out += [f"| {row['kind']} | {_cell(row, 'no_retrain')} | {_cell(row, 'retrained')} |"
                for row in res["fixed_vs_log"]]
        out.append("\n| start | error feedback | BLEU (Δ) |\n|---|---|---|")
        out += [f"| {row['start']} | {'on' if row['error_feedback'] else 'off'} | "
                f"{row['bleu']:.2f} ({row['delta_bleu']:+.2f}) |" for row in res["start_x_feedback"]]
        if "export" in res:
            e = res["export"]
            out.append(f"\n4-bit SavedModel: {e['packed_total_bytes'] / 1e6:.2f} MB vs "
                       f"{e['fp32_total_bytes'] / 1e6:.2f} MB ({e['total_ratio']:.2f}x; variables "
                       f"{e['variables_ratio']:.2f}x); fresh process matches: "
                       f"{e['fresh_process_matches_in_process']}")
    return "\n".join(out)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The study's command line (also ``python -m experiments quantization``)."""
    p = argparse.ArgumentParser(prog="python -m experiments quantization",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default="data_cache")
    p.add_argument("--work-dir", default="runs/quantization")
    p.add_argument("--results", default=str(common.results_path(__file__, "quantization.json")))
    p.add_argument("--models", default="transformer,gnmt")
    p.add_argument("--baseline-steps", type=int, default=None,
                   help="float32 baseline steps (default 6000); also the from-scratch runs'")
    p.add_argument("--baseline-run", action="append", default=[], metavar="KIND=DIR",
                   help="take this trained run as KIND's float32 baseline instead of training one")
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
    p.add_argument("--update", action="store_true",
                   help="add the listed models to an existing --results file, keeping the others")
    args = p.parse_args(argv)
    args.bits = [int(b) for b in args.bits.split(",")]
    args.baseline_runs = parse_baseline_runs(args.baseline_run, args.models.split(","))
    if args.update and args.overwrite:
        p.error("--update keeps the other models of --results, --overwrite replaces the file: "
                "give one")
    trains_baseline = set(args.models.split(",")) - set(args.baseline_runs)
    if args.baseline_steps is not None and not trains_baseline and args.retrain_scope != "all":
        p.error("--baseline-steps would be ignored: every model has a --baseline-run and "
                "--retrain-scope main trains nothing from scratch")
    if args.baseline_steps is None:
        args.baseline_steps = 6000
    return args


def parse_baseline_runs(items: Sequence[str], models: Sequence[str]) -> Dict[str, str]:
    """``["gnmt=runs/x"]`` -> ``{"gnmt": "runs/x"}``; SystemExit for a model not in ``models``
    or given twice."""
    runs: Dict[str, str] = {}
    for item in items:
        kind, sep, path = item.partition("=")
        if not sep or not path:
            raise SystemExit(f"--baseline-run wants KIND=DIR, got {item!r}")
        if kind not in models:
            raise SystemExit(f"--baseline-run {item}: {kind!r} is not in --models {','.join(models)}")
        if kind in runs:
            raise SystemExit(f"--baseline-run: {kind} given twice")
        runs[kind] = path
    return runs


def main(argv: Optional[Sequence[str]] = None,
         toy_data: Optional[Callable[[Path], Path]] = None) -> int:
    """Run the experiment for every model kind; print the tables and write the results.

    ``toy_data`` writes a toy prepared-data directory under the given path and returns it; it
    is what ``--tiny`` trains on (the script passes the test helpers' toy corpus).
    """
    args = parse_args(argv)
    results_path = Path(args.results)
    results = kept_results(results_path, args.update, args.models.split(","))
    if not args.update:
        common.refuse_existing([results_path], args.overwrite)
    if args.tiny:
        args.data_dir = common.toy_data_dir(toy_data, args.work_dir, "python -m experiments quantization")
        args.baseline_steps, args.retrain_steps, args.cycle = 30, 10, 10
        args.eval_limit = args.eval_limit or 10
    record = {"command": common.command_line("quantization", argv), "tiny": args.tiny,
              "settings": {k: v for k, v in vars(args).items() if k not in ("overwrite", "update")},
              "machine": machine.describe()}
    for kind in args.models.split(","):
        start = time.perf_counter()
        experiment = Experiment(kind, args, args.baseline_runs.get(kind))
        results["models"][kind] = {**experiment.go(), **record,
                                   "minutes": round((time.perf_counter() - start) / 60, 1)}
    print(tables(results))
    common.write_result(results_path, results, overwrite=True)
    print(f"\nwrote {results_path}")
    return 0


def kept_results(path: Path, update: bool, models: Sequence[str]) -> Dict[str, Any]:
    """The results to add to: with ``update``, the file's entries of models not in ``models``
    (a file of the older layout, with one command for all its models, gets that record copied
    into each entry); otherwise none."""
    if not update:
        return {"models": {}}
    if not path.is_file():
        raise SystemExit(f"--update: {path} does not exist")
    old = json.loads(path.read_text())
    shared = {k: old[k] for k in ("command", "tiny", "settings", "machine", "minutes") if k in old}
    return {"models": {kind: {**shared, **entry} for kind, entry in old.get("models", {}).items()
                       if kind not in models}}
