"""Weight EMA (train.ema_decay): the update rule, checkpointing, exact resume, which weights the
commands load (--weights, and their default: the EMA where a checkpoint holds one)."""
import json

import numpy as np
import pytest

from tests.helpers import write_toy_data_dir
from tests.training.test_trainer import tiny_config
from tf_nmt.compat import keras, tf
from tf_nmt.config import ConfigError
from tf_nmt.models.ema import WeightAverager, checkpoint_has_ema
from tf_nmt.run_dir import load_trained_model
from tf_nmt.training.trainer import train, validate_config

pytestmark = pytest.mark.keras2  # also in CI's Keras 2 pass


def reference_ema(steps_weights, decay):
    """NumPy: shadow after each step s = 1.. from the weights that step produced."""
    shadow, out = None, []
    for s, w in enumerate(steps_weights, start=1):
        d = 0.0 if s == 1 else min(decay, (1.0 + s) / (10.0 + s))
        w = [np.asarray(x, np.float32) for x in w]
        shadow = w if shadow is None else [np.float32(d) * a + np.float32(1.0 - d) * b
                                           for a, b in zip(shadow, w)]
        out.append([x.copy() for x in shadow])
    return out


def test_update_matches_a_numpy_reference_and_copies_the_first_step():
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.layers.Dense(4, input_shape=(3,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    averager = WeightAverager(model, 0.6)
    x, y = np.random.rand(8, 3).astype(np.float32), np.random.rand(8, 2).astype(np.float32)
    after, shadows = [], []
    for _ in range(15):
        model.train_on_batch(x, y)
        averager.update()
        after.append([v.numpy() for v in model.trainable_variables])
        shadows.append(averager.numpy())
    expected = reference_ema(after, 0.6)
    for got, want in zip(shadows, expected):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
    for g, w in zip(shadows[0], after[0]):  # step 1: the warm-up decay is 0, a copy
        np.testing.assert_array_equal(g, w)
    assert any(not np.allclose(g, w) for g, w in zip(shadows[-1], after[-1]))


@pytest.fixture()
def data_dir(tmp_path):
    return write_toy_data_dir(tmp_path / "data")


def ema_of(prefix):
    return [tf.train.load_variable(prefix, f"ema/shadow/{i}/.ATTRIBUTES/VARIABLE_VALUE")
            for i in range(len([n for n, _ in tf.train.list_variables(prefix)
                                if n.startswith("ema/shadow/")]))]


EMA = ("train.ema_decay=0.9", "train.steps_per_cycle=10")


@pytest.mark.slow
def test_training_keeps_the_ema_in_checkpoints_and_resume_is_exact(data_dir, tmp_path):
    straight, split = tmp_path / "straight", tmp_path / "split"
    train(tiny_config(data_dir, "train.train_steps=20", *EMA), straight, log=lambda _m: None)
    train(tiny_config(data_dir, "train.train_steps=10", *EMA), split, log=lambda _m: None)
    assert checkpoint_has_ema(str(split / "checkpoints" / "ckpt-10"))
    resumed = train(tiny_config(data_dir, "train.train_steps=20", *EMA), split,
                    log=lambda _m: None)
    assert resumed.resumed_from == 10
    a, b = ema_of(str(straight / "checkpoints" / "ckpt-20")), ema_of(str(split / "checkpoints" / "ckpt-20"))
    raw, _, _ = load_trained_model(straight, weights="raw")
    assert len(a) == len(raw.trainable_variables) > 0
    for x, y in zip(a, b):  # the same run, interrupted or not
        np.testing.assert_array_equal(x, y)
    # after 20 steps with decay 0.9 the average lags the weights
    assert any(not np.allclose(s, w.numpy()) for s, w in zip(a, raw.trainable_variables))
    ema_model, _, _ = load_trained_model(straight, weights="ema")
    for s, w in zip(a, ema_model.trainable_variables):
        np.testing.assert_array_equal(s, w.numpy())


@pytest.mark.slow
def test_the_trainer_updates_from_the_weights_after_each_step(data_dir, tmp_path):
    # a decay near 0 makes the average the weights of the last step (not of the step before)
    run = tmp_path / "run"
    train(tiny_config(data_dir, "train.train_steps=4", "train.steps_per_cycle=4",
                      "train.ema_decay=1e-7"), run, log=lambda _m: None)
    raw, _, _ = load_trained_model(run, weights="raw")
    ema = ema_of(str(run / "checkpoints" / "ckpt-4"))
    for s, w in zip(ema, raw.trainable_variables):
        np.testing.assert_allclose(s, w.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_weights_ema_through_the_commands(data_dir, tmp_path, capsys):
    from tf_nmt.cli import main
    from tf_nmt.inference.formats import EXPORT_WEIGHTS_RECORD
    from tf_nmt.inference.serving_graph import make_translate_fn, translate_texts

    run, plain = tmp_path / "run", tmp_path / "plain"
    train(tiny_config(data_dir, "train.train_steps=20", *EMA), run, log=lambda _m: None)
    report = tmp_path / "eval.json"
    assert main(["evaluate", "--run-dir", str(run), "--limit", "4", "--weights", "ema",
                 "--output-json", str(report)]) == 0
    assert json.loads(report.read_text())["weights"] == "ema"

    export = tmp_path / "export"
    assert main(["export", "--run-dir", str(run), "--export-dir", str(export),
                 "--weights", "ema", "--beam-size", "2"]) == 0
    assert json.loads((export / EXPORT_WEIGHTS_RECORD).read_text())["weights"] == "ema"
    import tensorflow_text  # noqa: F401
    loaded = tf.saved_model.load(str(export))
    ema_model, tokenizer, cfg = load_trained_model(run, weights="ema")
    raw_model, _, _ = load_trained_model(run, weights="raw")
    reader = tf.train.load_checkpoint(str(export / "variables" / "variables"))
    saved = [reader.get_tensor(name) for name, _ in
             tf.train.list_variables(str(export / "variables" / "variables"))
             if name.endswith("VARIABLE_VALUE")]
    def holds(model):
        return all(any(s.shape == w.shape and np.array_equal(s, w.numpy()) for s in saved)
                   for w in model.trainable_variables)
    assert holds(ema_model) and not holds(raw_model)
    lines = ["the file is open", "a new window", "print the list of packages"]
    served = [t.decode() for t in loaded.signatures["serving_default"](
        texts=tf.constant(lines))["translations"].numpy()]
    fn = make_translate_fn(ema_model, tokenizer, 2, cfg.decode.length_penalty)
    assert served == translate_texts(fn, tokenizer, lines, 8)

    avg = tmp_path / "avg"
    assert main(["average-checkpoints", "--run-dir", str(run), "--last", "2", "--output-dir",
                 str(avg), "--weights", "ema"]) == 0
    assert json.loads((avg / "averaged.json").read_text())["weights"] == "ema"
    prefixes = [str(run / "checkpoints" / f"ckpt-{s}") for s in (10, 20)]
    averaged, _, _ = load_trained_model(run, str(avg))
    for i, w in enumerate(averaged.trainable_variables):
        want = (ema_of(prefixes[0])[i].astype(np.float64) + ema_of(prefixes[1])[i]) / 2
        np.testing.assert_allclose(w.numpy(), want.astype(np.float32), rtol=1e-6)

    from tf_nmt.quantization.packed_file import read_packed
    from tf_nmt.commands.quantized_runs import quantize_run
    from tf_nmt.quantization.policy import QuantPolicy

    packed = tmp_path / "q.bin"
    report = tmp_path / "q.json"
    assert main(["quantize", "--run-dir", str(run), "--output", str(packed), "--weights", "ema",
                 "--report-json", str(report)]) == 0
    assert read_packed(packed).info["weights"] == "ema"
    assert json.loads(report.read_text())["weights"] == "ema"  # the report holds NumPy scales too
    _, qreport = quantize_run(run, QuantPolicy(bits=8, kind="fixed", scale="max",
                                               quantize_biases=False), weights="ema")
    assert qreport["weights"] == "ema"

    # no --weights: the EMA where the checkpoint holds one, and the record says so
    def evaluated(*args):
        assert main(["evaluate", "--limit", "2", "--output-json", str(report), *args]) == 0
        return json.loads(report.read_text())["weights"]

    assert evaluated("--run-dir", str(run)) == "ema"
    assert evaluated("--run-dir", str(run), "--weights", "raw") == "raw"
    assert evaluated("--run-dir", str(run), "--checkpoint", str(avg)) == "raw"  # an average: none
    default_export = tmp_path / "default-export"
    assert main(["export", "--run-dir", str(run), "--export-dir", str(default_export)]) == 0
    said = json.loads((default_export / EXPORT_WEIGHTS_RECORD).read_text())
    assert said["weights"] == "ema" and said["checkpoint"] == prefixes[1]  # resolved once
    assert main(["average-checkpoints", "--run-dir", str(run), "--last", "2", "--output-dir",
                 str(tmp_path / "avg2")]) == 0
    assert json.loads((tmp_path / "avg2" / "averaged.json").read_text())["weights"] == "ema"
    assert main(["quantize", "--run-dir", str(run), "--output", str(tmp_path / "q2.bin")]) == 0
    assert read_packed(tmp_path / "q2.bin").info["weights"] == "ema"
    source = tmp_path / "in.txt"
    source.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["translate", "--run-dir", str(run), "--input", str(source), "--beam-size", "2"]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == served  # what the EMA export serves
    assert f"translating with the ema weights of {prefixes[1]}" in out.err
    assert main(["translate", "--export-dir", str(export), "--input", str(source),
                 "--weights", "raw"]) == 2
    assert "--weights would be ignored" in capsys.readouterr().err

    # --weights ema of a run trained without it: one clear line
    train(tiny_config(data_dir, "train.train_steps=5", "train.steps_per_cycle=5"), plain,
          log=lambda _m: None)
    assert evaluated("--run-dir", str(plain)) == "raw"  # without EMA the default is raw
    capsys.readouterr()
    assert main(["evaluate", "--run-dir", str(plain), "--weights", "ema", "--limit", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds no EMA weights" in err[0] and "--weights raw" in err[0]
    assert main(["export", "--quantized", str(packed), "--export-dir", str(tmp_path / "e2"),
                 "--weights", "ema"]) == 2
    assert "--weights" in capsys.readouterr().err


@pytest.mark.parametrize("overrides, message", [
    (["train.ema_decay=0.9", "train.comm=fedavg"], "train.ema_decay"),
    (["train.ema_decay=0.9", "train.comm=graddrop"], "train.ema_decay"),
    (["train.ema_decay=0.9", "train.comm=bmuf"], "train.ema_decay"),
    (["train.ema_decay=0.9", "train.steps_per_execution=2", "train.train_steps=10",
      "train.steps_per_cycle=10", "train.log_every=10"], "every optimizer step"),
    (["train.ema_decay=0.9", "train.backward_passes_per_step=2"], "every optimizer step"),
])
def test_refusals(overrides, message, tmp_path):
    cfg = tiny_config(tmp_path, *overrides)
    with pytest.raises(ConfigError, match=message):
        validate_config(cfg)


def test_elastic_and_async_refuse_it(tmp_path):
    cfg = tiny_config(tmp_path, "train.ema_decay=0.9")
    validate_config(cfg)  # plain train accepts it, and the quickstart (its recipe sets it)
    validate_config(cfg, mode="quickstart")
    for mode in ("train-elastic", "train-async"):
        with pytest.raises(ConfigError, match="train.ema_decay"):
            validate_config(cfg, mode=mode)


def test_every_loader_defaults_to_the_rule_the_commands_use():
    """One rule for the weights (tf_nmt.run_dir.default_weights): every function that loads or
    averages a run's weights defaults to it (None), as the CLI does, rather than to "raw"."""
    import inspect

    from tf_nmt.commands import average, evaluate, export, quantize, quickstart, translate
    from tf_nmt.commands.quantized_runs import quantize_run
    from tf_nmt.evaluation.evaluate import evaluate_run
    from tf_nmt.run_dir import (choose_weights, default_weights, load_run,
                                load_trained_checkpoint)
    from tf_nmt.training.checkpoints import average_checkpoints

    loaders = [load_run, load_trained_model, load_trained_checkpoint, choose_weights,
               evaluate_run, average_checkpoints, quantize_run, quickstart.average_last_checkpoints,
               average.average, evaluate.evaluate, export.export_saved_model,
               export.export_ctranslate2, quantize.quantize, quantize.export_packed,
               translate.translate]
    for fn in loaders:
        assert inspect.signature(fn).parameters["weights"].default is None, fn.__qualname__
    assert (default_weights(True), default_weights(False)) == ("ema", "raw")
