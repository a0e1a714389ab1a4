"""Worker for tests/parallel/test_keras_coexistence_horovod.py: run under ``horovodrun -np 2``.

A user's script: TF_USE_LEGACY_KERAS unset, ``import keras`` (Keras 3) first and a tiny Keras 3
model fitted, then tf-nmt's Transformer trained for a few steps by tf-nmt's trainer with its
Horovod data parallelism (train.comm=sparse_as_dense, each rank on its own shard). Writes
``<out>/rank<r>.json`` (Keras versions, losses) and ``<out>/rank<r>.npz`` (the final weights).
"""
import os
import sys
from pathlib import Path

os.environ.pop("TF_USE_LEGACY_KERAS", None)  # a user's process: tf.keras is Keras 3
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # repo root, when not installed

import keras  # noqa: E402 - the user's Keras 3, before anything of tf-nmt
import numpy as np  # noqa: E402

keras.utils.set_random_seed(0)
USER_MODEL = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
USER_MODEL.compile(optimizer="sgd", loss="mse")
USER_LOSS = USER_MODEL.fit(np.ones((8, 4), "float32"), np.zeros((8, 1), "float32"),
                           epochs=2, verbose=0).history["loss"]

import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from tests.helpers import write_toy_data_dir  # noqa: E402
from tests.parallel.workers import run_rank  # noqa: E402
from tf_nmt.config import load_config  # noqa: E402
from tf_nmt.data.data_dir import ensure_vocab  # noqa: E402
from tf_nmt.training.trainer import train  # noqa: E402

TINY = ["model.kind=transformer", "model.num_layers=1", "model.d_model=16", "model.num_heads=2",
        "model.ff_dim=32", "model.dropout=0.0", "data.vocab_size=320", "data.batch_tokens=256",
        "train.steps_per_cycle=4", "train.log_every=2", "train.warmup_steps=4",
        "train.peak_lr=0.01", "train.seed=7", "train.train_steps=8", "train.comm=sparse_as_dense"]


class KeepModel:
    """Trainer hooks that keep the model the trainer built (to read its final weights)."""

    def __init__(self, ctx):
        self.ctx, self.model = ctx, None

    def context(self):
        return self.ctx

    def attach(self, model, ctx, log):
        self.model = model
        return []


def work(ctx, out: Path) -> dict:
    data = write_toy_data_dir(out / f"data{ctx.rank}")  # per rank: no races on the files
    ensure_vocab(data, 320, log=lambda _m: None)
    hooks = KeepModel(ctx)
    result = train(load_config(None, TINY + [f"data.data_dir={data}"]), out / "run",
                   log=lambda _m: None, hooks=hooks)
    np.savez(out / f"rank{ctx.rank}.npz", *hooks.model.get_weights())
    import horovod.tensorflow.keras as hvd_keras  # noqa: PLC0415 - what tf-nmt's trainer used

    return {"final_step": result.final_step,
            "losses": [h["loss"] for h in result.history],
            "keras": keras.__version__,
            "tf_keras_version": getattr(tf.keras, "__version__", "none"),
            "tf_keras_is_keras3": tf.keras.Model is keras.Model,
            "legacy_env": os.environ.get("TF_USE_LEGACY_KERAS"),
            "nmt_model_is_tf_keras": isinstance(hooks.model, tf_keras.Model),
            "horovod_callbacks_are_tf_keras": issubclass(
                hvd_keras.callbacks.BroadcastGlobalVariablesCallback, tf_keras.callbacks.Callback),
            "user_loss": USER_LOSS + USER_MODEL.fit(np.ones((8, 4), "float32"),
                                                    np.zeros((8, 1), "float32"),
                                                    epochs=1, verbose=0).history["loss"]}


if __name__ == "__main__":
    run_rank(work)
