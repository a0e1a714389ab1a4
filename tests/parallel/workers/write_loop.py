"""Writes checkpoints and exports in a loop until killed (``--write``), or checks what a killed
loop left behind (``--check``): used by tests/parallel/test_kill.py.

Iteration i fills every variable with i, saves checkpoint ``ckpt-i`` with a
tf.train.CheckpointManager (as training does) and exports a SavedModel through
``tf_nmt.export.saved_model.save_translator`` (staged, then renamed into place).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tf_nmt.compat import tf
from tf_nmt.export.saved_model import save_translator

SIZE = 2_000_000  # floats per variable: writes that take long enough to be killed mid-way


class Exported(tf.Module):
    """A module with variables and a string-in/string-out ``serve`` like the real translator."""

    def __init__(self) -> None:
        super().__init__()
        self.weights = [tf.Variable(tf.zeros([SIZE])) for _ in range(2)]

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="texts")])
        def serve(texts):
            total = tf.add_n([tf.reduce_sum(w) for w in self.weights])
            return {"translations": tf.strings.as_string(tf.fill(tf.shape(texts), total))}

        self.serve = serve


def write(root: Path) -> None:
    module = Exported()
    checkpoint = tf.train.Checkpoint(module=module)
    manager = tf.train.CheckpointManager(checkpoint, str(root / "checkpoints"), max_to_keep=3)
    start = int(manager.latest_checkpoint.rsplit("-", 1)[1]) + 1 if manager.latest_checkpoint else 1
    for i in range(start, start + 10_000):
        for w in module.weights:
            w.assign(tf.fill([SIZE], float(i)))
        manager.save(checkpoint_number=i)
        save_translator(module, root / "export", overwrite=True)
        print(f"wrote {i}", flush=True)


def check(root: Path) -> dict:
    module = Exported()
    latest = tf.train.latest_checkpoint(str(root / "checkpoints"))
    tf.train.Checkpoint(module=module).restore(latest).assert_existing_objects_matched()
    number = int(latest.rsplit("-", 1)[1])
    uniform = all(bool(tf.reduce_all(w == float(number))) for w in module.weights)
    export = root / "export"
    export_value = None
    if export.exists():
        served = tf.saved_model.load(str(export)).signatures["serving_default"]
        export_value = float(served(texts=tf.constant(["x"]))["translations"].numpy()[0])
    return {"checkpoint": number, "checkpoint_uniform": uniform, "export_value": export_value,
            "export_exists": export.exists(),
            "leftovers": sorted(p.name for p in root.iterdir() if p.name.startswith("."))}


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("root", type=Path)
    p.add_argument("--check", action="store_true")
    args = p.parse_args()
    if args.check:
        json.dump(check(args.root), sys.stdout)
    else:
        write(args.root)
