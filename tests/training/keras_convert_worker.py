"""Child process of tests/training/test_keras_convert.py, on the Keras its ``TF_NMT_KERAS`` picks.

    logits RUN WEIGHTS OUT.npy        the run's model outputs (raw or ema weights) on fixed inputs
    resume RUN DATA STEPS OUT.npz     train RUN on to STEPS, then its outputs and logged losses
"""
import sys
from pathlib import Path

import numpy as np

from tests.fixtures.make_keras2_run import SETTINGS
from tests.training.test_trainer import tiny_config
from tf_nmt.compat import tf
from tf_nmt.run_dir import load_run
from tf_nmt.training.callbacks import read_progress_log
from tf_nmt.training.trainer import train

INPUTS = {"source": tf.constant([[5, 9, 17, 33, 2, 0], [40, 41, 42, 2, 0, 0]], tf.int32),
          "target_in": tf.constant([[1, 7, 8, 9, 10, 11], [1, 60, 61, 62, 0, 0]], tf.int32)}

if __name__ == "__main__":
    what, run = sys.argv[1], Path(sys.argv[2])
    if what == "logits":
        model = load_run(run, weights=sys.argv[3]).model
        np.save(sys.argv[4], model(INPUTS, training=False).numpy())
    elif what == "resume":
        data, steps, out = Path(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
        train(tiny_config(data, *SETTINGS, f"train.train_steps={steps}"), run)
        logits = load_run(run, weights="raw").model(INPUTS, training=False).numpy()
        losses = [(e["step"], e["loss"]) for e in read_progress_log(run / "progress.jsonl")]
        np.savez(out, losses=np.array(losses), logits=logits)
    else:
        raise SystemExit(f"unknown {what}")
