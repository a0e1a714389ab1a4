"""The main job in one call: prepare-data → train a small Transformer → test BLEU → export,
then check the export in a fresh process and write its record, ``RUN_DIR/quickstart.json``.

It always trains a new run: an existing, non-empty run directory is refused (before any data is
touched) unless ``fresh``, which trains in a new timestamped directory beside it instead.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from tf_nmt.config import (QUICKSTART_AVERAGE_LAST, QUICKSTART_EMA_DECAY, QUICKSTART_MINUTES,
                           QUICKSTART_PRECISIONS, Config, load_config, preset)
from tf_nmt.compat import keras_name
from tf_nmt.config_usage import check_given
from tf_nmt.errors import UsageError
from tf_nmt.commands.average import average
from tf_nmt.commands.evaluate import evaluate
from tf_nmt.commands.prepare import prepare_builtin
from tf_nmt.commands.export import export_saved_model
from tf_nmt.commands.train import train
from tf_nmt.export.saved_model import directory_bytes
from tf_nmt.run_dir import RunDir, RunDirError, default_weights
from tf_nmt.training.autotune import fastest_precision
from tf_nmt.utils import machine
from tf_nmt.utils.io import write_json_atomic

SERVE_CHECK = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
texts = json.loads(sys.argv[2])
out = serve(texts=tf.constant(texts))["translations"].numpy()
print(json.dumps([t.decode("utf-8") for t in out]))
"""

SAMPLE_SENTENCES = ["Open the file.", "Click the OK button to close the dialog.",
                    "I don't know what you mean.", "The table has three columns."]


def average_last_checkpoints(run_dir: Path, k: int, weights: Optional[str] = None
                             ) -> Dict[str, Any]:
    """Average the ``weights`` (``raw``, ``ema``, or None: the EMA where every checkpoint holds
    one) of the run's last ``k`` checkpoints (or as many as it saved) into ``run_dir/averaged``,
    which holds them as its model weights; ``checkpoint`` is None when there is one checkpoint
    to use alone (:func:`tf_nmt.commands.average.average`)."""
    done = average(Path(run_dir), k, Path(run_dir) / "averaged", weights=weights, at_most=True)
    return {"checkpoint": done.checkpoint, "prefixes": done.prefixes, "weights": done.weights}


def serve_in_fresh_process(export_dir: Path, texts: List[str]) -> List[str]:
    """Translate ``texts`` with the SavedModel in a new interpreter that imports only TensorFlow
    and tensorflow_text (no tf_nmt), proving the export is self-contained."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    export_dir = Path(export_dir).resolve()  # the child runs in "/" so nothing local is imported
    proc = subprocess.run([sys.executable, "-c", SERVE_CHECK, str(export_dir), json.dumps(texts)],
                          capture_output=True, text=True, env=env, cwd="/", check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"the exported SavedModel failed in a fresh process:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def new_run_dir(run_dir: Path, fresh: bool = False) -> Path:
    """The directory quickstart trains in: ``run_dir`` when it is new or empty; with ``fresh``
    a new ``<run_dir>-<YYYYmmdd-HHMMSS>`` beside an existing one; else :class:`RunDirError`
    (quickstart never extends or overwrites a run)."""
    run_dir = Path(run_dir)
    if not run_dir.exists() or (run_dir.is_dir() and not any(run_dir.iterdir())):
        return run_dir
    if not fresh:
        raise RunDirError(
            f"{run_dir} already holds a run; quickstart never extends or overwrites one. Pass "
            f"--fresh to train a new run in {run_dir}-<timestamp>, or choose another --run-dir "
            f"(to continue this run: tf-nmt train --run-dir {run_dir} --preset quickstart)")
    stamped = run_dir.with_name(f"{run_dir.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    while stamped.exists():  # two fresh runs within one second
        stamped = stamped.with_name(stamped.name + "x")
    print(f"{run_dir} holds an earlier run; training a fresh one in {stamped}")
    return stamped


# The step count a time-budgeted run is given: the budget ends it (``--set train.train_steps=N
# --set train.time_budget_minutes=0`` trains N steps instead, e.g. to emulate a slower machine).
UNCAPPED_STEPS = 1_000_000
#: The quickstart's record, in the run directory it trained (``--results`` puts it elsewhere).
RECORD_NAME = "quickstart.json"

# The quickstart's data recipe, for every preset: dev and test are Ding dictionary sentences, 19%
# of the train pairs; repeating those 3x (41% of the pairs) lowered the dev loss by 0.24 nats and
# raised test BLEU at 2,200 steps in a same-seed pilot (README "More BLEU per hour",
# quickstart_pilots.json).
QUICKSTART_OVERSAMPLE: Dict[str, int] = {"ding": 3}


# Per preset, what else the quickstart changes for its time budget. The Transformer trains on
# 2,048-token batches, twice the updates of the preset's 4,096 in the same time (the warm-up and
# the evaluation cycle doubled, so both stay the same in tokens): in a same-seed pilot of 24.5
# minutes (experiments/quickstart/results/quickstart_pilots.json, third entry) dev loss 3.82 against 3.91, test BLEU
# 8.10 against 7.34, dev BLEU level (7.93). The presets keep 4,096: the studies and the speed
# benchmark against OpenNMT-tf measure that batch.
# The Transformer also keeps an EMA of its weights, which the quickstart scores and exports
# (QUICKSTART_EMA_DECAY: why). gnmt-small does not: EMA was not measured on the LSTM.
QUICKSTART_RECIPE: Dict[str, List[str]] = {
    "quickstart": ["data.batch_tokens=2048", "train.warmup_steps=600", "train.steps_per_cycle=500",
                   f"train.ema_decay={QUICKSTART_EMA_DECAY}"],
}


def recipe_overrides(preset_name: str) -> List[str]:
    """The quickstart's changes to ``preset_name``, as ``--set`` items (one mechanism for all of
    them, so the user's overrides after them win the same way)."""
    ding = ", ".join(f"{k}: {v}" for k, v in QUICKSTART_OVERSAMPLE.items())
    return [f"data.oversample={{{ding}}}"] + QUICKSTART_RECIPE.get(preset_name, [])


def quickstart_config(data_dir: Path, minutes: float, overrides: Optional[List[str]] = None,
                      preset_name: str = "quickstart") -> Config:
    """The quickstart's configuration: ``preset_name``, the data dir, a time budget instead of a
    step count, :func:`recipe_overrides`, then the user's ``overrides`` (which win). All but the
    user's overrides count as the preset's (``Config.given``): the user is not asked to drop a
    recipe key that a changed ``train.schedule`` no longer reads."""
    recipe = load_config(None, [f"data.data_dir={data_dir}", f"train.train_steps={UNCAPPED_STEPS}",
                                f"train.time_budget_minutes={minutes}"]
                         + recipe_overrides(preset_name),
                         base=preset(preset_name), origin="preset")
    return load_config(None, list(overrides or []), base=recipe)


def scored_weights(cfg: Config) -> str:
    """The weights the quickstart will score and export, known before it trains (for the
    default of ``--average-last``): :func:`tf_nmt.run_dir.default_weights` of a run that keeps
    an EMA (``train.ema_decay`` > 0)."""
    return default_weights(cfg.train.ema_decay > 0)


def sets(overrides: Optional[List[str]], dotted: str) -> bool:
    """Whether ``overrides`` (``section.key=value`` items, as :func:`load_config` reads them) set
    ``dotted``: an option that has a flag of its own too must be given once."""
    return any(o.startswith(dotted + "=") for o in overrides or [])


def run_quickstart(data_dir: Path, run_dir: Path, export_dir: Path,
                   results_path: Optional[Path] = None,
                   minutes: Optional[float] = None, overrides: Optional[List[str]] = None,
                   debs_dir: Optional[Path] = None, fresh: bool = False,
                   preset_name: str = "quickstart", precision: str = "auto",
                   average_last: Optional[int] = None) -> Dict[str, Any]:
    """Prepare data, train a new run (see :func:`new_run_dir`), evaluate its last checkpoint's
    weights (:func:`scored_weights`: the EMA where the run keeps one) or their average over the
    last checkpoints, export them, check the export in a fresh process and write the record to
    ``results_path`` (None: ``quickstart.json`` in the new run directory).
    ``preset_name``: the model and recipe (``quickstart``, the Transformer; ``gnmt-small``, the
    LSTM, for the same budget). ``precision``: ``auto`` times float32 and mixed bfloat16 steps
    on this machine first and trains with the faster (:mod:`tf_nmt.training.autotune`), or
    ``float32``/``bfloat16``. ``average_last``: score and export the average of the last K
    checkpoints (fewer where the run saved fewer; 1: the last checkpoint alone; None:
    ``QUICKSTART_AVERAGE_LAST`` for the scored weights). ``minutes``: the
    training time budget (None: ``QUICKSTART_MINUTES``; or ``--set`` it, not both)."""
    if precision not in QUICKSTART_PRECISIONS:
        raise UsageError(f"--precision {precision!r}: use one of {', '.join(QUICKSTART_PRECISIONS)}")
    precision_set = sets(overrides, "train.mixed_precision")
    if precision != "auto" and precision_set:
        raise UsageError("give the precision once: --precision or --set train.mixed_precision")
    if minutes is not None and sets(overrides, "train.time_budget_minutes"):
        raise UsageError("give the time budget once: --minutes or --set train.time_budget_minutes")
    cfg = quickstart_config(data_dir, QUICKSTART_MINUTES if minutes is None else minutes,
                            overrides, preset_name)
    check_given(cfg, "quickstart")  # before anything is prepared or written
    if cfg.train.time_budget_minutes <= 0 and cfg.train.train_steps == UNCAPPED_STEPS:
        raise UsageError("no time budget and no step limit: give --minutes M > 0, or a step "
                         "limit with --set train.train_steps=N")
    weights = scored_weights(cfg)
    if average_last is None:  # the default, at most the checkpoints the run keeps
        average_last = min(QUICKSTART_AVERAGE_LAST[weights], cfg.train.keep_checkpoints)
    if not 1 <= average_last <= cfg.train.keep_checkpoints:
        raise UsageError(f"--average-last {average_last}: use 1 (the last checkpoint alone) to "
                         f"train.keep_checkpoints ({cfg.train.keep_checkpoints}), the checkpoints "
                         f"a run keeps")
    run_dir = new_run_dir(run_dir, fresh)
    results_path = Path(results_path) if results_path else Path(run_dir) / RECORD_NAME
    t0 = time.perf_counter()
    stats = prepare_builtin(Path(data_dir), vocab_size=cfg.data.vocab_size, debs_dir=debs_dir)
    prepare_seconds = time.perf_counter() - t0
    probe: Optional[Dict[str, Any]] = None
    if not precision_set:  # else the user's --set decides
        if precision == "auto":
            choice = fastest_precision(cfg)
            mixed, probe = choice.mixed_precision, choice.as_dict()
        else:
            mixed = precision == "bfloat16"
        cfg.train.mixed_precision = mixed

    cpu0 = time.process_time()  # every thread of this process: training's cores busy
    result = train(cfg, Path(run_dir))
    train_cpu_seconds = time.process_time() - cpu0
    last = evaluate(Path(run_dir), split="test", weights="raw")  # the raw weights, to compare
    averaged = average_last_checkpoints(Path(run_dir), average_last, weights)
    # an averaged checkpoint holds the averaged weights (raw or EMA) as its model weights
    scored = dict(checkpoint=averaged["checkpoint"],
                  weights="raw" if averaged["checkpoint"] else weights)
    report = (last if scored == dict(checkpoint=None, weights="raw") else
              evaluate(Path(run_dir), split="test", **scored))
    if Path(export_dir).exists():
        print(f"replacing the previous quickstart export in {export_dir}")
    export_saved_model(Path(run_dir), Path(export_dir), overwrite=True,
                       averaged=averaged["prefixes"], **scored)
    served = serve_in_fresh_process(Path(export_dir), SAMPLE_SENTENCES)
    for en, de in zip(SAMPLE_SENTENCES, served):
        print(f"  {en}  →  {de}")

    final = result.history[-1] if result.history else {}
    step_times = [h["s_per_step"] for h in result.history if h.get("s_per_step")]
    payload = {
        "command": "tf-nmt quickstart " + " ".join(sys.argv[2:]),
        "bleu": round(report["bleu"], 2),
        "chrf": round(report["chrf"], 2),
        "copy_baseline_bleu": round(report["copy_baseline_bleu"], 2),
        "bleu_over_copy_baseline": round(report["bleu"] - report["copy_baseline_bleu"], 2),
        "sacrebleu_signature": report["signature"],
        "bleu_text": report["bleu_text"],
        "test_sentences": report["sentences"],
        "beam_size": report["beam_size"],
        # what "bleu" scores: these weights (ema: their moving average, train.ema_decay) of the
        # last checkpoint or averaged over "averaged"; the raw weights of the last one beside it
        "weights": weights,
        "ema_decay": cfg.train.ema_decay,
        "checkpoint_average": {"asked": average_last, "averaged": averaged["prefixes"],
                               "last_checkpoint_bleu": round(last["bleu"], 2),
                               "last_checkpoint_chrf": round(last["chrf"], 2),
                               "last_checkpoint_bleu_text": last["bleu_text"]},
        "preset": preset_name,
        "keras": keras_name(),  # tf_keras 2.x or keras 3.x (TF_NMT_KERAS / --keras)
        "precision": {"mixed_precision": cfg.train.mixed_precision, "asked": precision,
                      "probe": probe},
        "model": {"kind": cfg.model.kind, "hparams": cfg.model.hparams,
                  "parameters": result.num_parameters, "vocab_size": RunDir(Path(run_dir)).vocabularies().target.vocab_size},
        "training": {"steps": result.final_step, "minutes": round(result.wall_seconds / 60, 2),
                     "oversample": cfg.data.oversample,
                     # what ended training: the budget (0: none)
                     # or a step limit set with --set (None: the budget alone)
                     "time_budget_minutes": cfg.train.time_budget_minutes,
                     "step_limit": (None if cfg.train.train_steps == UNCAPPED_STEPS
                                    else cfg.train.train_steps),
                     "batch_tokens": cfg.data.batch_tokens,
                     "final_train_loss": final.get("loss"), "dev_loss": result.val_loss,
                     "last_tokens_per_s": final.get("tokens_per_s"),
                     "last_s_per_step": final.get("s_per_step"),
                     # the mean over the logged intervals: what to compare across machines
                     "mean_s_per_step": (round(sum(step_times) / len(step_times), 4)
                                         if step_times else None),
                     # CPU seconds over wall seconds of train(): the cores training kept busy
                     "cores_busy": round(train_cpu_seconds / max(result.wall_seconds, 1e-9), 3)},
        "corpus": stats.get("splits", stats),
        "prepare_seconds": round(prepare_seconds, 1),
        "translate_seconds": round(report["translate_seconds"], 1),
        "export": {"path": str(export_dir), "bytes": directory_bytes(Path(export_dir)),
                   "fresh_process_samples": dict(zip(SAMPLE_SENTENCES, served))},
        "examples": report["examples"],
        "total_minutes": round((time.perf_counter() - t0) / 60, 2),
        "machine": machine.describe(),
    }
    write_json_atomic(Path(results_path), payload)
    n = len(averaged["prefixes"])
    scored = "the last checkpoint" if n < 2 else f"the average of the last {n} checkpoints"
    print(f"BLEU {payload['bleu']} ({weights} weights of {scored}; "
          f"the last checkpoint's raw weights {payload['checkpoint_average']['last_checkpoint_bleu']}; "
          f"copy baseline {payload['copy_baseline_bleu']}); "
          f"{payload['model']['parameters']:,} parameters; trained {payload['training']['minutes']} min; "
          f"results in {results_path}")
    return payload
