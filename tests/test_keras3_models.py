"""tf-nmt's own models on Keras 3 (``TF_NMT_KERAS=3`` / ``tf-nmt --keras 3``), single process.

This pytest process builds tf-nmt's models on Keras 2 (the default, fixed once per process by
:mod:`tf_nmt.compat`), so every Keras 3 scenario runs in ONE child process
(tests/keras3/models_worker.py, which imports ``keras`` before tf_nmt as a user's script does)
that writes its findings to JSON; each test checks one of them. The SavedModels the child
exports are loaded here with plain ``tf.saved_model.load``. Keras 2's side of the refusals (a
Keras 3 run evaluated on Keras 2, ``--keras`` naming the other version) runs in this process.

Under ``TF_NMT_KERAS=3`` (the suite run on Keras 3) the Keras 2 run is trained, and the Keras 3
run evaluated, in a Keras 2 child instead, and ``--keras 2`` is the refused flag.

The restore test catches the Keras 3 list-tracking bug: without ``Seq2SeqModel.__setattr__``
(tf_nmt/models/base.py) the layers in ``encoder_layers``/``decoder_layers`` are not restored by
``load_trained_model`` and its weights differ from the ones training ended with.
"""
import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # trains tiny models in a child process (~1-2 min together)

from tests.data.own_corpus_fixture import write_own_corpus  # noqa: E402
from tests.training.test_own_corpus import config  # noqa: E402
from tf_nmt import cli  # noqa: E402
from tf_nmt.compat import ENV_VAR, KERAS3, KERAS_VERSION, tf  # noqa: E402
from tf_nmt.errors import UserError  # noqa: E402
from tf_nmt.training.trainer import train  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
WORKER = REPO / "tests" / "keras3" / "models_worker.py"


def keras3_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    env.update({ENV_VAR: "3", "TF_CPP_MIN_LOG_LEVEL": "2"})
    return env


KERAS2_TRAIN = ("import sys; from tests.training.test_own_corpus import config; "
                "from tf_nmt.training.trainer import train; "
                "train(config(sys.argv[1], 'train.train_steps=2', 'train.steps_per_cycle=2'), "
                "sys.argv[2], log=lambda _m: None)")


def keras2_child(argv, code=None):
    """``python -m tf_nmt ARGV`` (or ``-c CODE ARGV``) in a Keras 2 child: (rc, stderr lines)."""
    env = dict(keras3_env(), **{ENV_VAR: "2", "TF_CPP_MIN_LOG_LEVEL": "3"})
    head = ["-c", code] if code else ["-m", "tf_nmt"]
    proc = subprocess.run([sys.executable, *head, *map(str, argv)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    return proc.returncode, proc.stderr.splitlines()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(the child's results, the Keras 3 output dir, the Keras 2 run)."""
    root = tmp_path_factory.mktemp("keras3-models")
    data = write_own_corpus(root / "data", num_shards=2)
    keras2_run = root / "keras2-run"
    if KERAS3:
        rc, err = keras2_child([data, keras2_run], code=KERAS2_TRAIN)
        assert rc == 0, err[-30:]
    else:
        train(config(data, "train.train_steps=2", "train.steps_per_cycle=2"), keras2_run,
              log=lambda _m: None)
    out = root / "out"
    out.mkdir()
    proc = subprocess.run([sys.executable, str(WORKER), "--out", str(out), "--data", str(data),
                           "--keras2-run", str(keras2_run)],
                          cwd=REPO, env=keras3_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((out / "results.json").read_text()), out, keras2_run


def found(runs, key):
    """The child's findings for ``key``, or the traceback of the scenario that failed."""
    results = runs[0]
    if key not in results:  # the train scenario reports under train/restore/evaluate/export
        pytest.fail(f"no result {key!r}: {results.get('train', {}).get('error', results)}")
    assert "error" not in results[key], results[key]["error"]
    return results[key]


def falls_by_a_fifth(losses):
    assert len(losses) >= 2 and losses[-1] < 0.8 * losses[0], losses


def one_line_error(stderr):
    assert len(stderr) == 1 and stderr[0].startswith("tf-nmt: error: "), stderr
    return stderr[0]


def serve(export_dir, texts):
    """Translations of ``texts`` by an export, loaded with plain TensorFlow in this process."""
    loaded = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
    return [t.decode() for t in loaded(texts=tf.constant(texts))["translations"].numpy()]


def test_train_builds_and_trains_a_keras3_model(runs):
    res = found(runs, "train")
    assert res["keras_version"].startswith("3.") and res["compat_version"] == 3
    assert res["is_keras3_model"] and res["tf_nmt_keras_is_keras3"]
    assert res["meta_keras"] == 3
    falls_by_a_fifth(res["losses"])


def test_resume_is_exact(runs):
    """40 straight steps == 20 + resume to 40: every checkpoint tensor (model, Adam slots,
    EMA shadow) bit-identical."""
    res = found(runs, "resume")
    keys = res["keys_straight"]
    assert keys == res["keys_split"]
    assert any(k.startswith("ema/shadow/") for k in keys)
    assert any(k.startswith("optimizer/_variables/") for k in keys)  # Adam's m and v
    assert "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE" in keys
    assert len(keys) > 100 and res["differing"] == []


def test_restored_checkpoint_has_the_trained_weights(runs):
    res = found(runs, "restore")
    assert res["n_weights"] == res["n_restored"] > 30
    assert res["n_differing"] == 0, \
        f"{res['n_differing']} weights differ by up to {res['max_diff']}"


def test_evaluate_gives_the_bleu_of_the_in_process_translations(runs):
    res = found(runs, "evaluate")
    assert res["rc"] == 0 and res["stderr"] == []
    assert res["hyp_file"] == found(runs, "export")["in_process"]
    assert res["bleu"] == pytest.approx(res["recomputed_bleu"], abs=1e-9)


def test_export_translates_as_in_process(runs):
    res = found(runs, "export")
    assert res["rc"] == 0 and res["stderr"] == []
    assert len(set(res["in_process"])) > 1, res["in_process"]  # a model that tells them apart
    assert serve(res["dir"], res["sources"]) == res["in_process"]


def test_mixed_bfloat16(runs):
    res = found(runs, "bf16")
    assert res["compute_dtypes"] == ["bfloat16"] and res["variable_dtypes"] == ["float32"]
    falls_by_a_fifth(res["losses"])
    runtime = res["runtime"]
    assert runtime["precision"]["policy"] == "mixed_bfloat16"
    assert set(runtime["kernels"]) == {"loss", "dropout", "norm"}
    for kernel in runtime["kernels"].values():
        assert kernel["setting"] == "auto" and kernel["used"] in ("fused", "tf")


def test_gnmt_trains_and_exports(runs):
    res = found(runs, "gnmt")
    falls_by_a_fifth(res["losses"])
    assert res["export_rc"] == 0 and res["stderr"] == []
    assert serve(res["dir"], res["sources"]) == res["in_process"]


def test_a_users_keras3_script_trains_tf_nmt_models(runs):
    res = found(runs, "user_script")
    assert res["tf_keras_before"].startswith("3.") and res["tf_keras_after"].startswith("3.")
    assert res["tf_keras_is_keras"] and res["transformer_is_keras3"]
    falls_by_a_fifth(res["transformer_losses"])
    # SharedEmbedding inside the user's own functional Keras 3 model
    assert res["own_losses"][-1] < res["own_losses"][0] and res["embedding_moved"] > 1e-3


def test_keras3_refuses_a_keras2_run(runs):
    _res, _out, keras2_run = runs
    res = found(runs, "refusals")["evaluate_keras2_run"]
    assert res["rc"] == 2 and res["unchanged"] and not res["wrote_json"]
    line = one_line_error(res["stderr"])
    assert f"{keras2_run} was trained with Keras 2 but this process uses Keras 3" in line
    assert f"{ENV_VAR}=2" in line


@pytest.mark.parametrize("name,says", [("train_async", "train-async runs on Keras 2 only")])
def test_keras3_refuses_what_runs_on_keras2_only(runs, name, says):
    res = found(runs, "refusals")[name]
    assert res["rc"] == 2 and not res["run_dir_exists"]
    assert says in one_line_error(res["stderr"])


def run_cli(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    return rc, err.getvalue().splitlines()


def test_keras2_refuses_a_keras3_run(runs):
    _res, out, _k2 = runs
    run = out / "straight"
    before = sorted((str(p), p.stat().st_mtime_ns) for p in run.rglob("*"))
    argv = ["evaluate", "--run-dir", str(run), "--split", "dev",
            "--output-json", str(out / "k3-eval-under-k2.json")]
    rc, err = keras2_child(argv) if KERAS3 else run_cli(argv)
    assert rc == 2
    assert "was trained with Keras 3 but this process uses Keras 2" in one_line_error(err)
    assert sorted((str(p), p.stat().st_mtime_ns) for p in run.rglob("*")) == before
    assert not (out / "k3-eval-under-k2.json").exists()


def test_the_other_keras_flag_in_this_process_is_refused(tmp_path, monkeypatch):
    """``--keras 3`` in this Keras 2 process (``--keras 2`` when the suite runs on Keras 3)."""
    mine, other = str(KERAS_VERSION), "2" if KERAS3 else "3"
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(UserError, match=f"already uses Keras {mine}"):
        cli.choose_keras(other)
    rc, err = run_cli(["--keras", other, "evaluate", "--run-dir", str(tmp_path / "run")])
    assert rc == 2
    assert f"--keras {other}: this process already uses Keras {mine}" in one_line_error(err)
    assert ENV_VAR not in os.environ and not (tmp_path / "run").exists()
    cli.choose_keras(mine)  # the version it has: accepted
