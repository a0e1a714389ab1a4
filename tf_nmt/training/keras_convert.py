"""Convert a run directory from one Keras version to the other (``tf-nmt convert-keras``).

The two versions name and nest some objects differently in a checkpoint (Keras 3's ``Dense``
keeps ``_kernel``; the shared embedding is a layer of its own), so a checkpoint restores only into
its own version's model (:func:`tf_nmt.run_dir.check_keras`). One process holds one Keras, so the
conversion runs in two: a child process on the run's Keras (``TF_NMT_KERAS``) restores each kept
checkpoint and writes its values in a version-free form (:func:`dump_checkpoint`: the model's
weights in creation order with their names, the optimizer's ``iterations`` and per-variable
slots), and this process builds the same model on its own Keras, checks every name and shape
pair, assigns them and saves the checkpoint at the same step (:func:`write_checkpoint`). The EMA
shadow (:mod:`tf_nmt.models.ema`) is a plain ``tf.Module`` in both versions and is copied as it is.

What converts: the chief's checkpoints (model, EMA, and the optimizer state of Adam or SGD), the
vocabularies, config, logs and data position. A run trained on several ranks, or with state of
its own in its checkpoints (GradDrop residuals, BMUF, quantisation re-training), converts for
evaluation, averaging, export and transfer (``--init-from``) but not to resume: its ``meta.json``
says so and :func:`tf_nmt.run_dir.check_resume` refuses it in one line.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

import tf_nmt
from tf_nmt.compat import ENV_VAR, KERAS3, KERAS_VERSION, keras, tf, variable_name
from tf_nmt.config import load_config
from tf_nmt.models.dropout import CHECKPOINT_KEY as DROPOUT_KEY, DropoutSeeds
from tf_nmt.models.ema import CHECKPOINT_KEY as EMA_KEY, ShadowWeights
from tf_nmt.run_dir import RunDir, RunDirError, build_initialised_model
from tf_nmt.training.checkpoints import RANK_DIR, list_checkpoints, make_manager, step_of
from tf_nmt.training.optimizers import build_optimizer, create_slots
from tf_nmt.utils.io import replace_directory_atomically, staging_directory, write_json_atomic

SLOTS = {"adam": ("m", "v"), "sgd": ()}  # the optimizer state per trainable variable
# Checkpoint keys a resumable single-process run may hold: anything else is state that only the
# trainer of the run's own version knows how to rebuild.
PLAIN_KEYS = ("model", "optimizer", EMA_KEY, DROPOUT_KEY, "save_counter",
              "_CHECKPOINTABLE_OBJECT_GRAPH")


def _slot_variables(optimizer: Any, model: keras.Model, kind: str) -> Dict[str, List[Any]]:
    """``{slot: [variable per trainable variable]}`` of a built optimizer, in either version."""
    variables = model.trainable_variables
    if kind == "sgd":
        return {}
    if KERAS3:  # Adam keeps its moments in lists in the order it was built with
        return {"m": list(optimizer._momentums), "v": list(optimizer._velocities)}  # noqa: SLF001
    return {name: [optimizer.get_slot(v, name) for v in variables] for name in SLOTS[kind]}


def _build_optimizer(cfg: Any, model: keras.Model) -> Any:
    # a schedule, as the trainer passes (a float would add a learning-rate variable that the
    # checkpoint does not hold)
    optimizer = build_optimizer(cfg.train, keras.optimizers.schedules.ExponentialDecay(0.0, 1, 1.0))
    create_slots(optimizer, model.trainable_variables)
    return optimizer


def _model_of(run: RunDir, cfg: Any) -> keras.Model:
    vocab = run.vocabularies()
    return build_initialised_model(cfg.model.kind, vocab.target.vocab_size, cfg.model.hparams,
                                   source_vocab_size=vocab.source_vocab_size)


def dump_checkpoint(run_dir: Path, prefix: str, out: Path) -> Dict[str, Any]:
    """Restore ``prefix`` of ``run_dir`` on this process's Keras (the run's) and write its model
    weights and optimizer state to ``out`` (``.npz``); returns what was written."""
    run = RunDir(Path(run_dir))
    cfg = load_config(run.config_path)
    model = _model_of(run, cfg)
    arrays: Dict[str, np.ndarray] = {f"model/{i}": v.numpy() for i, v in enumerate(model.weights)}
    names = [variable_name(v) for v in model.weights]
    optimizer_state = cfg.train.optimizer in SLOTS
    if optimizer_state:
        optimizer = _build_optimizer(cfg, model)
        status = tf.train.Checkpoint(model=model, optimizer=optimizer).restore(prefix)
        try:
            status.expect_partial().assert_existing_objects_matched()
        except AssertionError:  # an optimizer of another shape (a wrapper's nesting)
            optimizer_state = False
    if not optimizer_state:
        tf.train.Checkpoint(model=model).restore(prefix).expect_partial() \
            .assert_existing_objects_matched()
    arrays.update({f"model/{i}": v.numpy() for i, v in enumerate(model.weights)})
    if optimizer_state:
        arrays["optimizer/iterations"] = np.asarray(optimizer.iterations.numpy())
        for slot, variables in _slot_variables(optimizer, model, cfg.train.optimizer).items():
            arrays.update({f"optimizer/{slot}/{i}": v.numpy() for i, v in enumerate(variables)})
    np.savez(out, **arrays)
    return {"names": names, "optimizer_state": optimizer_state}


def _same_name(a: str, b: str) -> bool:
    """Names of one variable in the two versions: the same leaf, and the scopes of the shorter a
    subsequence of the longer's (tf_keras names a weight by its name scopes, Keras 3 by its
    layers' path: ``transformer/encoder_0/gamma`` and
    ``transformer/encoder_0/res_attention/norm/gamma``)."""
    short, long = sorted((a.split(":")[0].split("/"), b.split(":")[0].split("/")), key=len)
    if short[-1] != long[-1]:
        return False
    rest = iter(long[:-1])
    return all(part in rest for part in short[:-1])


def write_checkpoint(run: RunDir, cfg: Any, prefix: str, dumped: Dict[str, Any], npz: Path,
                     directory: Path, keep: int, with_optimizer: bool) -> None:
    """Build the run's model (and optimizer) on this process's Keras, assign the dumped values
    after checking names and shapes pair by pair, copy the EMA shadow, save at ``prefix``'s step."""
    model = _model_of(run, cfg)
    values = np.load(npz)
    names = dumped["names"]
    if len(names) != len(model.weights):
        raise RunDirError(f"{prefix}: the Keras {tf_nmt.recorded_keras(run.read_meta())} model has {len(names)} "
                          f"weights, this one {len(model.weights)}: not the same architecture")
    for i, (name, var) in enumerate(zip(names, model.weights)):
        value = values[f"model/{i}"]
        if not _same_name(name, variable_name(var)) or tuple(value.shape) != tuple(var.shape):
            raise RunDirError(f"{prefix}: weight {i} is {name} {tuple(value.shape)} there but "
                              f"{variable_name(var)} {tuple(var.shape)} here")
        var.assign(value)
    state: Dict[str, Any] = {"model": model}
    if with_optimizer:
        optimizer = _build_optimizer(cfg, model)
        optimizer.iterations.assign(int(values["optimizer/iterations"]))
        for slot, variables in _slot_variables(optimizer, model, cfg.train.optimizer).items():
            for i, var in enumerate(variables):
                var.assign(values[f"optimizer/{slot}/{i}"])
        state["optimizer"] = optimizer
    reader = tf.train.load_checkpoint(prefix)
    shadow_keys = sorted((k for k in reader.get_variable_to_shape_map()
                          if k.startswith(f"{EMA_KEY}/shadow/")),
                         key=lambda k: int(k.split("/")[2]))
    if shadow_keys:
        shadow = ShadowWeights(model.trainable_variables)
        if len(shadow_keys) != len(shadow.shadow):
            raise RunDirError(f"{prefix}: {len(shadow_keys)} EMA tensors for "
                              f"{len(shadow.shadow)} trainable variables")
        for var, key in zip(shadow.shadow, shadow_keys):
            var.assign(reader.get_tensor(key))
        state[EMA_KEY] = shadow
    seeds = DropoutSeeds(cfg.train.seed)   # the dropout masks drawn so far: the same on both
    if seeds.restore(prefix):
        state[DROPOUT_KEY] = seeds.draws
    manager = make_manager(tf.train.Checkpoint(**state), directory, keep)
    manager.save(checkpoint_number=step_of(prefix))


def _plain(prefix: str) -> bool:
    """True when a checkpoint holds nothing but model, optimizer and EMA (see :data:`PLAIN_KEYS`)."""
    return all(name.split("/")[0] in PLAIN_KEYS for name, _ in tf.train.list_variables(prefix))


def convert_run(run_dir: Path, output_dir: Path,
                log: Any = print) -> Dict[str, Any]:
    """Write ``output_dir``, ``run_dir`` converted to this process's Keras (see the module doc);
    returns the ``converted_from`` record its ``meta.json`` holds."""
    run, out = RunDir(Path(run_dir)), Path(output_dir)
    meta = run.read_meta()
    if meta is None or not run.config_path.is_file():
        raise RunDirError(f"{run.root} is not a tf-nmt run directory (no meta.json/config.yaml)")
    saved = tf_nmt.recorded_keras(meta)
    if saved == KERAS_VERSION:
        raise RunDirError(f"{run.root} was trained with Keras {saved}, this process's Keras: "
                          f"nothing to convert (to convert to the other, set {ENV_VAR})")
    if out.exists():
        raise RunDirError(f"{out} exists; give a new --output-dir (nothing was written)")
    prefixes = list_checkpoints(run.checkpoints)
    if not prefixes:
        raise RunDirError(f"{run.root} has no checkpoints to convert")
    cfg = load_config(run.config_path)
    rank_state = any(run.checkpoints.glob(RANK_DIR.format(rank="*")))
    staged = staging_directory(out)
    try:
        for item in run.root.iterdir():  # everything but the checkpoints, as it is
            if item.name != run.checkpoints.name:
                (shutil.copytree if item.is_dir() else shutil.copy2)(item, staged / item.name)
        all_optimizer = True
        for prefix in prefixes:
            npz = staged / f".{Path(prefix).name}.npz"
            dumped = _dump_in_child(run.root, prefix, npz, saved)
            all_optimizer &= dumped["optimizer_state"]
            write_checkpoint(run, cfg, prefix, dumped, npz, staged / run.checkpoints.name,
                             keep=len(prefixes), with_optimizer=dumped["optimizer_state"])
            npz.unlink()
            log(f"converted {Path(prefix).name} (step {step_of(prefix)})")
        why_not = [reason for reason, bad in (
            (f"trained on {meta.get('world_size')} ranks", meta.get("world_size", 1) != 1),
            ("its ranks' own state (checkpoints/rank-*) does not convert", rank_state),
            ("the optimizer state did not convert", not all_optimizer),
            ("its checkpoints hold training state other than model, optimizer and EMA",
             not all(map(_plain, prefixes)))) if bad]
        record = {"run_dir": str(run.root), "keras": saved, "checkpoints": len(prefixes),
                  "resumable": not why_not, "why_not_resumable": why_not}
        write_json_atomic(staged / "meta.json", dict(meta, keras=KERAS_VERSION,
                                                     converted_from=record))
        replace_directory_atomically(staged, out, overwrite=False)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    return record


def _dump_in_child(run_dir: Path, prefix: str, out: Path, keras_version: int) -> Dict[str, Any]:
    """:func:`dump_checkpoint` in a child process on Keras ``keras_version``."""
    env = dict(os.environ, **{ENV_VAR: str(keras_version)})
    proc = subprocess.run([sys.executable, "-m", __name__, str(run_dir), prefix, str(out)],
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RunDirError(f"reading {prefix} on Keras {keras_version} failed: {last}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":  # the child of _dump_in_child
    result = dump_checkpoint(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]))
    print(json.dumps(result))


__all__: Tuple[str, ...] = ("convert_run", "dump_checkpoint", "write_checkpoint")
