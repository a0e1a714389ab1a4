"""``import tf_nmt`` leaves the process's Keras alone (issue 47): a Keras 3 script imports tf_nmt,
trains tf-nmt's Transformer through the Python API, and keeps Keras 3 as ``tf.keras``.

Each case runs in a fresh interpreter with TF_USE_LEGACY_KERAS unset (as in a user's process);
the Horovod case is tests/parallel/test_keras_coexistence_horovod.py.
"""
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

KERAS3_FIRST = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    import numpy as np
    import keras                                   # the user's Keras 3, imported first
    x, y = np.ones((8, 4), "float32"), np.zeros((8, 1), "float32")
    keras.utils.set_random_seed(0)
    mine = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    mine.compile(optimizer="sgd", loss="mse")
    before = mine.fit(x, y, epochs=2, verbose=0).history["loss"]

    import tf_nmt                                  # then tf-nmt, trained through its API
    import tensorflow as tf, tf_keras
    from tests.helpers import write_toy_data_dir
    from tf_nmt.config import load_config
    from tf_nmt.run_dir import load_trained_model
    from tf_nmt.training.trainer import train
    out = Path(sys.argv[1])
    tiny = ["model.kind=transformer", "model.num_layers=1", "model.d_model=32",
            "model.num_heads=2", "model.ff_dim=64", "model.dropout=0.0", "data.vocab_size=320",
            "data.batch_tokens=256", "train.peak_lr=0.003", "train.warmup_steps=10",
            "train.log_every=5", "train.seed=7", "train.train_steps=30", "train.steps_per_cycle=10",
            f"data.data_dir={write_toy_data_dir(out / 'data')}"]
    result = train(load_config(None, tiny), out / "run", log=lambda _m: None)
    nmt_model = load_trained_model(out / "run")[0]
    after = mine.fit(x, y, epochs=1, verbose=0).history["loss"]   # Keras 3 still trains
    print("RESULT " + json.dumps({
        "keras": keras.__version__, "tf_keras_version": getattr(tf.keras, "__version__", "none"),
        "tf_keras_is_keras3": tf.keras.Model is keras.Model,
        "legacy_env": os.environ.get("TF_USE_LEGACY_KERAS"),
        "nmt_model_is_tf_keras": isinstance(nmt_model, tf_keras.Model),
        "nmt_model_is_keras3": isinstance(nmt_model, keras.Model),
        "final_step": result.final_step, "losses": [h["loss"] for h in result.history],
        "user_losses": before + after}))
""")

TF_NMT_FIRST = textwrap.dedent("""
    import json, os
    import tf_nmt, tf_nmt.compat, tf_nmt.training.trainer   # tf-nmt first, TensorFlow loaded
    import tensorflow as tf
    import keras
    print("RESULT " + json.dumps({"tf_keras_version": getattr(tf.keras, "__version__", "none"),
                                  "tf_keras_is_keras3": tf.keras.Model is keras.Model,
                                  "compat_keras": tf_nmt.compat.keras.__name__,
                                  "legacy_env": os.environ.get("TF_USE_LEGACY_KERAS")}))
""")


def run_child(code: str, *args: str, tf_nmt_keras: str = "") -> dict:
    """Run ``code`` in a fresh interpreter without TF_USE_LEGACY_KERAS (a user's process) and with
    ``TF_NMT_KERAS=tf_nmt_keras`` (unset when empty: tf-nmt's default, whatever Keras the suite
    runs on); its RESULT line."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_USE_LEGACY_KERAS", "TF_NMT_KERAS")}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", OMP_NUM_THREADS="1")
    if tf_nmt_keras:
        env["TF_NMT_KERAS"] = tf_nmt_keras
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.slow
def test_keras3_script_imports_tf_nmt_and_trains_its_transformer(tmp_path):
    res = run_child(KERAS3_FIRST, str(tmp_path))
    assert res["final_step"] == 30
    losses = res["losses"]
    assert len(losses) >= 3 and all(math.isfinite(v) for v in losses), losses
    assert losses[-1] < losses[0], losses
    # tf-nmt's default is Keras 3: its Transformer is a Keras 3 model, like the user's
    assert res["nmt_model_is_keras3"] and not res["nmt_model_is_tf_keras"]
    # the user's Keras is untouched: Keras 3 as `keras` and as `tf.keras`, no variable set
    assert res["keras"].startswith("3.") and res["tf_keras_version"].startswith("3.")
    assert res["tf_keras_is_keras3"] and res["legacy_env"] is None
    assert len(res["user_losses"]) == 3 and res["user_losses"][-1] < res["user_losses"][0]


@pytest.mark.parametrize("tf_nmt_keras,models_on", [("", "keras"), ("3", "keras"),
                                                     ("2", "tf_keras")])
def test_tf_keras_is_keras3_after_importing_tf_nmt_first(tf_nmt_keras, models_on):
    res = run_child(TF_NMT_FIRST, tf_nmt_keras=tf_nmt_keras)
    assert res["tf_keras_version"].startswith("3.") and res["tf_keras_is_keras3"], res
    assert res["compat_keras"] == models_on and res["legacy_env"] is None
