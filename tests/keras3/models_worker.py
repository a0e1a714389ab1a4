"""Worker for tests/test_keras3_models.py: every Keras 3 scenario in ONE child process.

Run with ``TF_NMT_KERAS=3`` (``TF_USE_LEGACY_KERAS`` unset): like a user's Keras 3 script it
imports ``keras`` before tf_nmt. Each scenario writes its findings under its own key of
``<out>/results.json`` (an exception becomes ``{"error": ...}``, so one broken scenario does not
hide the others); the test file checks one finding per test.

usage: models_worker.py --out DIR --data OWN_CORPUS_DIR --keras2-run RUN_DIR
"""
import argparse
import contextlib
import io
import json
import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, when not installed

import keras  # noqa: E402  - the user's Keras 3, first (tf.keras is Keras 3 too)
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

TF_KERAS_BEFORE = tf.keras.__version__

from tests.training.test_own_corpus import TINY  # noqa: E402  - imports tf_nmt (Keras 3 models)
from tf_nmt import cli  # noqa: E402
from tf_nmt.compat import KERAS_VERSION, all_layers  # noqa: E402
from tf_nmt.training import trainer  # noqa: E402

BEAM = 2
PEAK_LR = 0.03  # 40 steps then translate the dev sentences differently, not one string
TRAINED = []  # every model tf-nmt's trainer built in this process, in order


def _spy_build_and_compile(real):
    def build_and_compile(*args, **kwargs):
        model = real(*args, **kwargs)
        TRAINED.append(model)
        return model
    return build_and_compile


trainer.build_and_compile = _spy_build_and_compile(trainer.build_and_compile)


def plant(defects):
    """Undo Keras 3 fixes, to see the tests fail (``KERAS3_MODELS_PLANT=setattr,...``):
    ``setattr``: lists of layers tracked by Keras only (tf_nmt/models/base.py ``__setattr__``);
    ``save_signature``: Keras 3's default save signature; ``loss_call``: Keras 3's
    ``Loss.__call__`` (float32 casts)."""
    from tf_nmt.models.base import Seq2SeqModel
    from tf_nmt.models.losses import LabelSmoothedCrossEntropy

    for defect in filter(None, defects.split(",")):
        owner, attr = {"setattr": (Seq2SeqModel, "__setattr__"),
                       "save_signature": (Seq2SeqModel, "_default_save_signature"),
                       "loss_call": (LabelSmoothedCrossEntropy, "__call__")}[defect]
        delattr(owner, attr)


plant(os.environ.get("KERAS3_MODELS_PLANT", ""))


def tf_nmt(*argv):
    """``tf-nmt --keras 3 ARGV``: (exit status, the stderr lines)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = cli.main(["--keras", "3", *argv])
    return rc, err.getvalue().splitlines()


def train_run(data, run, steps, *extra, tiny=TINY):
    settings = [*tiny, f"train.train_steps={steps}", "train.steps_per_cycle=10",
                "train.log_every=5", f"train.peak_lr={PEAK_LR}", *extra]
    rc, err = tf_nmt("train", "--data-dir", str(data), "--run-dir", str(run),
                     *[a for s in settings for a in ("--set", s)])
    assert rc == 0, err
    return TRAINED[-1]


def logged_losses(run):
    from tf_nmt.training.callbacks import PROGRESS_LOG, read_progress_log

    return [e["loss"] for e in read_progress_log(run / PROGRESS_LOG)]


def meta(run):
    return json.loads((run / "meta.json").read_text())


def translate_dev(run, data):
    """tf-nmt's in-process translation of the dev sources with ``run``'s latest checkpoint (its
    raw weights: the EMA, which loaders default to where a run keeps one, is tested apart)."""
    from tf_nmt.data.data_dir import load_split
    from tf_nmt.inference.serving_graph import make_translate_fn, translate_texts
    from tf_nmt.run_dir import load_trained_model

    model, tokenizer, cfg = load_trained_model(run, weights="raw")
    pairs = load_split(data, "dev")
    fn = make_translate_fn(model, tokenizer, BEAM, cfg.decode.length_penalty)
    sources = [s for s, _ in pairs]
    return model, sources, [t for _, t in pairs], translate_texts(fn, tokenizer, sources)


def checkpoint_tensors(run):
    reader = tf.train.load_checkpoint(str(run / "checkpoints"))
    return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
            if k != "_CHECKPOINTABLE_OBJECT_GRAPH"}


def scenario_train(out, data):
    """1 + 3: a Keras 3 Transformer trained with ``tf-nmt --keras 3 train`` (EMA on), its
    checkpoint restored, evaluated and exported."""
    from tf_nmt.compat import keras as tf_nmt_keras
    from tf_nmt.evaluation.bleu import corpus_bleu, tokenizer_for

    run = out / "straight"
    model = train_run(data, run, 40, "train.ema_decay=0.9")
    trained = [w.copy() for w in model.get_weights()]
    restored, sources, refs, hyps = translate_dev(run, data)
    diffs = [float(np.max(np.abs(a - b))) for a, b in zip(trained, restored.get_weights())]
    # --weights raw: the run keeps an EMA, which the commands would load by default
    rc_eval, err_eval = tf_nmt("evaluate", "--run-dir", str(run), "--split", "dev",
                               "--beam-size", str(BEAM), "--output-json", str(out / "eval.json"),
                               "--weights", "raw")
    report = json.loads((out / "eval.json").read_text())
    rc_exp, err_exp = tf_nmt("export", "--run-dir", str(run), "--export-dir", str(out / "export"),
                             "--beam-size", str(BEAM), "--weights", "raw")
    return {"train": {"losses": logged_losses(run), "meta_keras": meta(run).get("keras"),
                      "is_keras3_model": isinstance(model, keras.Model),
                      "tf_nmt_keras_is_keras3": tf_nmt_keras is keras,
                      "keras_version": keras.__version__, "compat_version": KERAS_VERSION},
            "restore": {"n_weights": len(trained), "n_restored": len(restored.get_weights()),
                        "max_diff": max(diffs), "n_differing": sum(d > 0 for d in diffs)},
            "evaluate": {"rc": rc_eval, "stderr": err_eval, "bleu": report["bleu"],
                         "recomputed_bleu": corpus_bleu(hyps, refs,
                                                        tokenizer_for("fr")[0]).score,
                         "hyp_file": (run / "dev.hyp.fr").read_text().splitlines()},
            "export": {"rc": rc_exp, "stderr": err_exp, "dir": str(out / "export"),
                       "sources": sources, "in_process": hyps}}


def scenario_resume(out, data):
    """2: 20 steps + resume to 40 == 40 straight (the straight run from scenario_train)."""
    split = out / "split"
    train_run(data, split, 20, "train.ema_decay=0.9")
    train_run(data, split, 40, "train.ema_decay=0.9")
    a, b = checkpoint_tensors(out / "straight"), checkpoint_tensors(split)
    return {"keys_straight": sorted(a), "keys_split": sorted(b),
            "differing": sorted(k for k in a if k in b and not np.array_equal(a[k], b[k]))}


def scenario_bf16(out, data):
    """4: train.mixed_precision=true on Keras 3."""
    run = out / "bf16"
    model = train_run(data, run, 40, "train.mixed_precision=true")
    layers = [layer for layer in all_layers(model) if layer.weights]
    return {"losses": logged_losses(run), "runtime": meta(run).get("runtime"),
            "compute_dtypes": sorted({layer.compute_dtype for layer in layers}),
            "variable_dtypes": sorted({tf.as_dtype(v.dtype).name for v in model.weights})}


def scenario_gnmt(out, data):
    """5: a tiny GNMT trains and exports on Keras 3."""
    run = out / "gnmt"
    gnmt = ["model.kind=gnmt", "model.num_layers=2", "model.units=32", "model.dropout=0.0",
            *[s for s in TINY if not s.startswith("model.")]]
    train_run(data, run, 40, tiny=gnmt)
    _model, sources, _refs, hyps = translate_dev(run, data)
    rc, err = tf_nmt("export", "--run-dir", str(run), "--export-dir", str(out / "gnmt-export"),
                     "--beam-size", str(BEAM))
    return {"losses": logged_losses(run), "export_rc": rc, "stderr": err,
            "dir": str(out / "gnmt-export"), "sources": sources, "in_process": hyps}


def scenario_user_script(out, data):
    """6: a user's Keras 3 code trains tf-nmt's Transformer, and a tf-nmt layer in a model of
    its own, with plain compile/fit."""
    from tf_nmt.models import build_model
    from tf_nmt.models.base import BOS_ID, EOS_ID
    from tf_nmt.models.embedding import SharedEmbedding
    from tf_nmt.models.losses import LabelSmoothedCrossEntropy

    keras.utils.set_random_seed(0)
    vocab, n, length = 24, 64, 6
    rng = np.random.default_rng(0)
    src = rng.integers(4, vocab, (n, length)).astype("int32")
    inputs = {"source": src,
              "target_in": np.concatenate([np.full((n, 1), BOS_ID, "int32"), src], 1)}
    labels = np.concatenate([src, np.full((n, 1), EOS_ID, "int32")], 1)
    ds = tf.data.Dataset.from_tensor_slices((inputs, labels)).batch(16)
    model = build_model("transformer", vocab, num_layers=1, d_model=32, num_heads=2, ff_dim=64,
                        dropout=0.0)
    model.compile(keras.optimizers.Adam(3e-3), loss=LabelSmoothedCrossEntropy(0.0))
    history = model.fit(ds, epochs=8, verbose=0).history["loss"]

    ids = keras.Input((length,), dtype="int32")
    x = SharedEmbedding(vocab, 16, output_bias=False, name="shared")(ids)
    x = keras.layers.GlobalAveragePooling1D()(x)
    mine = keras.Model(ids, keras.layers.Dense(4)(x))
    before = mine.get_layer("shared").get_weights()[0].copy()
    mine.compile(keras.optimizers.Adam(1e-2),
                 loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    own = mine.fit(src, src[:, 0] % 4, batch_size=16, epochs=10, verbose=0).history["loss"]
    moved = float(np.max(np.abs(mine.get_layer("shared").get_weights()[0] - before)))
    return {"tf_keras_before": TF_KERAS_BEFORE, "tf_keras_after": tf.keras.__version__,
            "tf_keras_is_keras": tf.keras.Model is keras.Model,
            "transformer_is_keras3": isinstance(model, keras.Model),
            "transformer_losses": history, "own_losses": own, "embedding_moved": moved}


def scenario_refusals(out, data, keras2_run):
    """7: what Keras 3 refuses, one line and exit status 2 each, nothing written."""
    results = {}
    before = sorted((p.name, p.stat().st_mtime_ns) for p in keras2_run.rglob("*"))
    rc, err = tf_nmt("evaluate", "--run-dir", str(keras2_run), "--split", "dev",
                     "--output-json", str(out / "k2-eval.json"))
    after = sorted((p.name, p.stat().st_mtime_ns) for p in keras2_run.rglob("*"))
    results["evaluate_keras2_run"] = {"rc": rc, "stderr": err, "unchanged": before == after,
                                      "wrote_json": (out / "k2-eval.json").exists()}
    for name, argv in [("train_async", ["train-async"])]:  # graddrop runs: tests/parallel
        run = out / f"refused-{name}"
        rc, err = tf_nmt(argv[0], "--data-dir", str(data), "--run-dir", str(run), *argv[1:],
                         *[a for s in TINY + ["train.train_steps=2"] for a in ("--set", s)])
        results[name] = {"rc": rc, "stderr": err, "run_dir_exists": run.exists()}
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--keras2-run", type=Path, required=True)
    args = parser.parse_args()
    results = {}
    scenarios = [("train", lambda: scenario_train(args.out, args.data)),
                 ("resume", lambda: scenario_resume(args.out, args.data)),
                 ("bf16", lambda: scenario_bf16(args.out, args.data)),
                 ("gnmt", lambda: scenario_gnmt(args.out, args.data)),
                 ("user_script", lambda: scenario_user_script(args.out, args.data)),
                 ("refusals", lambda: scenario_refusals(args.out, args.data, args.keras2_run))]
    for name, run in scenarios:
        try:
            found = run()
        except Exception:  # noqa: BLE001 - recorded; the test of this scenario shows it
            found = {"error": traceback.format_exc()[-3000:]}
        if name == "train" and "error" not in found:
            results.update(found)
        else:
            results[name] = found
        (args.out / "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
