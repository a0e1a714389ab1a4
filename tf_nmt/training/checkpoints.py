"""Checkpointing: keep-N managed checkpoints, per-rank training state, restore, and averaging
of the last N.

tf.train.CheckpointManager writes the data files first and only then rewrites the small
``checkpoint`` state file (atomically, by rename), so a crash mid-write never leaves a "latest"
pointer to a partial checkpoint.

A run has the chief's checkpoints, ``checkpoints/ckpt-N`` (rank 0's model, optimizer state and
the mode's state: what evaluation, export and transfer load), and, where ranks hold state of
their own (``CommSettings.rank_checkpoints``: graddrop, fedavg, bmuf), every rank's own
``checkpoints/rank-<r>/ckpt-N`` written at the same steps: its model, optimizer state with its
GradDrop residuals, BMUF's W and Δ, as training continues from them. A resume restores each
rank from its own (:func:`restore_training_state`).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable, List, Optional

import numpy as np

from tf_nmt.compat import keras, tf
from tf_nmt.distributed.context import DistContext
from tf_nmt.distributed.sync import chief_value
from tf_nmt.errors import UserError
from tf_nmt.models.ema import restore_ema_weights
from tf_nmt.run_dir import checkpoints_weights
from tf_nmt.utils.io import replace_directory_atomically, staging_directory

RANK_DIR = "rank-{rank}"  # a rank's own checkpoints, inside the run's checkpoints/ directory


def make_checkpoint(model: keras.Model, optimizer: Optional[keras.optimizers.Optimizer] = None,
                    **state: Any) -> tf.train.Checkpoint:
    """The model, its optimizer (when given) and further named trackables (``state``)."""
    if optimizer is not None:
        state["optimizer"] = optimizer
    return tf.train.Checkpoint(model=model, **state)


def make_manager(checkpoint: tf.train.Checkpoint, directory: Path, keep: int) -> tf.train.CheckpointManager:
    return tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=keep)


def rank_directory(checkpoints: Path, rank: int) -> Path:
    """Where ``rank`` keeps its own training state: ``<checkpoints>/rank-<r>``."""
    return Path(checkpoints) / RANK_DIR.format(rank=rank)


def make_rank_manager(checkpoint: tf.train.Checkpoint, checkpoints: Path, rank: int,
                      keep: int) -> tf.train.CheckpointManager:
    """The manager of ``rank``'s own checkpoints. It keeps at least two, so that after a crash
    between two ranks' saves of step N every rank still holds the step before."""
    return make_manager(checkpoint, rank_directory(checkpoints, rank), max(keep, 2))


def step_of(prefix: Optional[str]) -> int:
    """The step a checkpoint prefix ``.../ckpt-N`` was saved at (N); -1 for None."""
    return int(prefix.rsplit("-", 1)[1]) if prefix else -1


def _min_over_ranks(value: int, ctx: DistContext, name: str) -> int:
    if not ctx.distributed:
        return value
    return int(ctx.hvd.allreduce(tf.constant(value, tf.int64), op=ctx.hvd.Min, name=name).numpy())


def _missing_ranks(held: bool, ctx: DistContext) -> List[int]:
    """The ranks (all of them agree) whose ``held`` is False."""
    if not ctx.distributed:
        return [] if held else [ctx.rank]
    flags = np.zeros(ctx.size, np.int64)
    flags[ctx.rank] = 0 if held else 1
    total = ctx.hvd.allreduce(tf.constant(flags), op=ctx.hvd.Sum, name="resume_missing").numpy()
    return [rank for rank, flag in enumerate(total) if flag]


def restore_training_state(checkpoint: tf.train.Checkpoint, manager: tf.train.CheckpointManager,
                           rank_manager: Optional[tf.train.CheckpointManager], ctx: DistContext,
                           log: Callable[[str], None] = print,
                           world_size_changed: bool = False) -> str:
    """Restore ``checkpoint`` for a resume (every rank calls it); returns the prefix restored.

    With ``rank_manager`` every rank restores its own checkpoint of the newest step all ranks
    hold (agreed by an allreduce; after a crash between two ranks' saves that is the step
    before). A rank that does not hold it (no checkpoints of its own: a run written before
    per-rank checkpoints or with another ``train.comm``; or not that step) is a UserError naming
    the rank and the file, raised on every rank: restoring rank 0's state there would silently
    hand it rank 0's GradDrop residuals and local model. Only where the world size changed
    (``world_size_changed``: ``--allow-world-size-change`` or an elastic resize), and the ranks'
    own states cannot carry over, does every rank restore the chief's newest checkpoint, i.e.
    rank 0's state, and the chief says so. Without ``rank_manager`` every rank restores the
    checkpoint the chief sees as newest (its step is broadcast): a rank that looked at the
    shared directory itself could see an older one (a save still being written, a network file
    system's cache) and skip a different number of batches.
    """
    if rank_manager is not None:
        own = step_of(rank_manager.latest_checkpoint)
        step = _min_over_ranks(own, ctx, "resume_step")
        prefix = str(Path(rank_manager.directory) / f"ckpt-{step}")
        # step -1: some rank has none at all (those are named), else the ranks without that step
        held = Path(f"{prefix}.index").is_file() if step >= 0 else own >= 0
        missing = _missing_ranks(held, ctx)
        if not missing:
            checkpoint.restore(prefix).assert_existing_objects_matched()
            return prefix
        checkpoints = Path(rank_manager.directory).parent
        if not world_size_changed:
            files = ", ".join(str(rank_directory(checkpoints, r) / f"ckpt-{step}.index")
                              if step >= 0 else f"{rank_directory(checkpoints, r)}/ (no checkpoint)"
                              for r in missing)
            raise UserError(
                f"cannot resume exactly: rank(s) {', '.join(map(str, missing))} have no checkpoint "
                f"of their own{f' for step {step}' if step >= 0 else ''} ({files}); every rank "
                "must restore its own state "
                "(GradDrop residuals, local model, BMUF's W and Δ), not rank 0's. Resume with the "
                "train.comm the run was written with, or start a new --run-dir")
        log(f"the world size changed, so the ranks' own checkpoints under {checkpoints}/"
            f"{RANK_DIR.format(rank='<r>')} do not carry over: every rank resumes from rank 0's "
            "state (its GradDrop residuals and local model included)")
    prefix = manager.latest_checkpoint
    if ctx.distributed:
        step = chief_value(step_of(prefix), ctx, "resume_chief_step")
        prefix = str(Path(manager.directory) / f"ckpt-{step}")
        if step < 0 or not Path(f"{prefix}.index").is_file():
            raise UserError(f"rank {ctx.rank} cannot read {prefix}, the chief's newest "
                            "checkpoint: the run directory must be on a file system every rank "
                            "shares")
    checkpoint.restore(prefix).assert_existing_objects_matched()
    return prefix


def list_checkpoints(directory: Path) -> List[str]:
    """All checkpoint prefixes the manager in ``directory`` knows, oldest first."""
    state = tf.train.get_checkpoint_state(str(directory))
    if state is None:
        return []
    return list(state.all_model_checkpoint_paths)


def average_checkpoints(model: keras.Model, prefixes: List[str], output_dir: Path,
                        overwrite: bool = False, weights: Optional[str] = None) -> str:
    """Average the model weights of ``prefixes`` into a new checkpoint under ``output_dir``
    (``weights="ema"``: their moving averages, ``train.ema_decay``, written as the new
    checkpoint's model weights; None: :func:`tf_nmt.run_dir.checkpoints_weights`, the EMA where
    every checkpoint holds one; ``averaged.json`` records which).

    ``model`` must already be built with the same architecture. The result is written to a
    temporary directory that is renamed into place, and an existing ``output_dir`` is only
    replaced when ``overwrite`` is set.
    """
    if not prefixes:
        raise ValueError("no checkpoints to average")
    weights = checkpoints_weights(prefixes, weights)
    output_dir = Path(output_dir)
    if output_dir.exists() and not overwrite:
        raise FileExistsError(f"{output_dir} exists; pass --overwrite to replace it")
    total = None
    for prefix in prefixes:
        tf.train.Checkpoint(model=model).restore(prefix).expect_partial().assert_existing_objects_matched()
        if weights == "ema":
            restore_ema_weights(model, prefix)
        values = [w.astype(np.float64) for w in model.get_weights()]
        total = values if total is None else [t + w for t, w in zip(total, values)]
    model.set_weights([(t / len(prefixes)).astype(np.float32) for t in total])
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = staging_directory(output_dir)
    try:
        manager = make_manager(tf.train.Checkpoint(model=model), tmp, keep=1)
        manager.save(checkpoint_number=0)
        (tmp / "averaged_from.txt").write_text("\n".join(prefixes) + "\n")
        (tmp / "averaged.json").write_text(json.dumps({"weights": weights,
                                                       "checkpoints": [str(p) for p in prefixes]},
                                                      indent=1) + "\n")
        # The manager recorded the temporary directory's path: name the checkpoint relative to
        # the directory instead (TensorFlow reads a relative name against the directory), so
        # the state file is right once renamed, whether output_dir is absolute or relative.
        (tmp / "checkpoint").write_text('model_checkpoint_path: "ckpt-0"\n'
                                        'all_model_checkpoint_paths: "ckpt-0"\n')
        replace_directory_atomically(tmp, output_dir, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return str(output_dir / "ckpt-0")
