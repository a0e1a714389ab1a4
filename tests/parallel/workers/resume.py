"""Worker for tests/parallel/test_resume_exact.py: run under ``horovodrun -np 2`` (also used in
one process by tests/distributed/comm/test_resume_single.py).

For each mode the real trainer trains a tiny Transformer (no dropout) straight to ``STEPS``, and
in another run directory to ``STOP`` (off the averaging and cycle grids) and then, as a new
``train`` call that restores everything from disk, on to ``STEPS``. Each rank compares its own
checkpoint of step ``STEPS`` (``checkpoints/rank-<r>/``: model, optimizer slots with GradDrop
residuals, BMUF's W and Δ) between the two runs, tensor by tensor; the chief does the same for
its model checkpoint. Writes ``<out>/rank<r>.json``.
"""
import sys
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # repo root, when not installed

import numpy as np  # noqa: E402

from tests.helpers import write_toy_data_dir  # noqa: E402
from tests.parallel.workers import run_rank  # noqa: E402
from tf_nmt.compat import tf  # noqa: E402
from tf_nmt.config import load_config  # noqa: E402
from tf_nmt.data.data_dir import ensure_vocab  # noqa: E402
from tf_nmt.training.checkpoints import rank_directory  # noqa: E402
from tf_nmt.training.trainer import train  # noqa: E402

STEPS, STOP = 8, 5
TINY = ["model.kind=transformer", "model.num_layers=1", "model.d_model=16", "model.num_heads=2",
        "model.ff_dim=32", "model.dropout=0.0", "data.vocab_size=320", "data.batch_tokens=256",
        "train.steps_per_cycle=4", "train.log_every=100", "train.warmup_steps=4",
        "train.peak_lr=0.01", "train.seed=7"]
MODES: Dict[str, List[str]] = {
    "graddrop_local": ["train.comm=graddrop", "train.drop_ratio=0.9", "train.drop_warmup_steps=2",
                       "train.local_gradients=true", "train.average_every=3"],
    "bmuf": ["train.comm=bmuf", "train.average_every=3"],
    "fedavg": ["train.comm=fedavg", "train.average_every=3"],
    "graddrop": ["train.comm=graddrop", "train.drop_ratio=0.9", "train.drop_warmup_steps=2"],
    "sparse_as_dense": ["train.comm=sparse_as_dense"],
}
# Modes whose ranks keep state of their own (checkpoints/rank-<r>/): residuals, W/Δ, drifted
# models. The others hold one model, in the chief's checkpoint, that every rank restores.
RANK_STATE = ("graddrop_local", "bmuf", "fedavg", "graddrop")


def tensors(prefix: str) -> Dict[str, np.ndarray]:
    """Every saved tensor of a checkpoint but the save counter, by name."""
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if not name.startswith("save_counter") and name != "_CHECKPOINTABLE_OBJECT_GRAPH"}


def variable_names(prefix: str) -> List[str]:
    """The names of the variables a checkpoint holds, from its object graph: Keras 2 keys its
    optimizer slots by name, Keras 3 by position (``optimizer/_variables/7``), but both record
    each variable's own name (``..._gd_residual``) there."""
    from tensorflow.core.protobuf import trackable_object_graph_pb2  # noqa: PLC0415

    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(tf.train.load_checkpoint(prefix).get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    return sorted({a.full_name for node in graph.nodes for a in node.attributes if a.full_name})


def compare(a: str, b: str) -> Dict[str, object]:
    """How checkpoint ``b`` differs from ``a``: names on one side only, largest difference."""
    ta, tb = tensors(a), tensors(b)
    common = sorted(set(ta) & set(tb))
    diffs = {n: float(np.max(np.abs(ta[n].astype(np.float64) - tb[n].astype(np.float64))))
             if ta[n].size else 0.0 for n in common}
    return {"only_one_side": sorted(set(ta) ^ set(tb)), "tensors": len(common),
            "max_abs_diff": max(diffs.values()), "worst": max(diffs, key=diffs.get),
            "names": common + variable_names(b)}


def run_mode(ctx, base: Path, data: Path, name: str, log=lambda _m: None) -> dict:
    """Straight and interrupted runs of ``MODES[name]`` under ``base``; their comparison."""
    def cfg(steps: int):
        return load_config(None, TINY + MODES[name] + [f"data.data_dir={data}",
                                                       f"train.train_steps={steps}"])

    straight, split = base / f"{name}-straight", base / f"{name}-split"
    train(cfg(STEPS), straight, log=log)
    first = train(cfg(STOP), split, log=log)
    second = train(cfg(STEPS), split, log=log)
    mine = lambda run, rank=ctx.rank: str(rank_directory(run / "checkpoints", rank) / f"ckpt-{STEPS}")  # noqa: E731
    rank_dirs = sorted(p.name for p in (split / "checkpoints").glob("rank-*"))
    out = {"first_final": first.final_step, "resumed_from": second.resumed_from,
           "final": second.final_step, "rank_dirs": rank_dirs,
           "rank_state": compare(mine(straight), mine(split)) if rank_dirs else None}
    if ctx.is_chief:  # the chief's model checkpoint, and (several ranks) how far ranks drifted
        model = f"ckpt-{STEPS}"
        out["chief"] = compare(str(straight / "checkpoints" / model), str(split / "checkpoints" / model))
        if ctx.size > 1 and rank_dirs:
            out["ranks_differ"] = compare(mine(straight, 0), mine(straight, 1))["max_abs_diff"]
    return out


def work(ctx, out: Path) -> dict:
    """Every mode, straight and interrupted, on this rank's copy of the toy data."""
    data = write_toy_data_dir(out / f"data{ctx.rank}")  # per rank: no races on the files
    ensure_vocab(data, 320, log=lambda _m: None)
    log = (lambda m: print(f"[rank {ctx.rank}] {m}", flush=True)) if ctx.is_chief else (lambda _m: None)
    return {name: run_mode(ctx, out, data, name, log) for name in MODES}


if __name__ == "__main__":
    run_rank(work)
