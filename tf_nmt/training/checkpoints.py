"""Checkpointing: keep-N managed checkpoints, restore, and averaging of the last N.

tf.train.CheckpointManager writes the data files first and only then rewrites the small
``checkpoint`` state file (atomically, by rename), so a crash mid-write never leaves a "latest"
pointer to a partial checkpoint.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import List, Optional

import numpy as np

from tf_nmt.compat import keras, tf


def make_checkpoint(model: keras.Model, optimizer: Optional[keras.optimizers.Optimizer] = None
                    ) -> tf.train.Checkpoint:
    if optimizer is None:
        return tf.train.Checkpoint(model=model)
    return tf.train.Checkpoint(model=model, optimizer=optimizer)


def make_manager(checkpoint: tf.train.Checkpoint, directory: Path, keep: int) -> tf.train.CheckpointManager:
    return tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=keep)


def list_checkpoints(directory: Path) -> List[str]:
    """All checkpoint prefixes the manager in ``directory`` knows, oldest first."""
    state = tf.train.get_checkpoint_state(str(directory))
    if state is None:
        return []
    return list(state.all_model_checkpoint_paths)


def average_checkpoints(model: keras.Model, prefixes: List[str], output_dir: Path,
                        overwrite: bool = False) -> str:
    """Average the model weights of ``prefixes`` into a new checkpoint under ``output_dir``.

    ``model`` must already be built with the same architecture. The result is written to a
    temporary directory that is renamed into place, and an existing ``output_dir`` is only
    replaced when ``overwrite`` is set.
    """
    if not prefixes:
        raise ValueError("no checkpoints to average")
    output_dir = Path(output_dir)
    if output_dir.exists() and not overwrite:
        raise FileExistsError(f"{output_dir} exists; pass --overwrite to replace it")
    total = None
    for prefix in prefixes:
        tf.train.Checkpoint(model=model).restore(prefix).expect_partial().assert_existing_objects_matched()
        weights = [w.astype(np.float64) for w in model.get_weights()]
        total = weights if total is None else [t + w for t, w in zip(total, weights)]
    model.set_weights([(t / len(prefixes)).astype(np.float32) for t in total])
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=output_dir.parent, prefix=f".{output_dir.name}."))
    try:
        manager = make_manager(tf.train.Checkpoint(model=model), tmp, keep=1)
        manager.save(checkpoint_number=0)
        (tmp / "averaged_from.txt").write_text("\n".join(prefixes) + "\n")
        if output_dir.exists():
            shutil.rmtree(output_dir)
        os.replace(tmp, output_dir)
        # The state file records absolute paths of the temporary directory; rewrite it.
        tf.compat.v1.train.update_checkpoint_state(str(output_dir), str(output_dir / "ckpt-0"),
                                         all_model_checkpoint_paths=[str(output_dir / "ckpt-0")])
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return str(output_dir / "ckpt-0")
