"""Worker for tests/parallel/test_keras3_tfnmt.py: tf-nmt's Transformer on Keras 3
(``TF_NMT_KERAS=3`` in the ranks' environment) under ``horovodrun -np 2``.

Every scenario trains through the trainer's own pieces (``build_and_compile``: Adam, the schedule
scaled to 2 workers, ``comm.wrap_optimizer``; ``comm.comm_callbacks``) on synthetic batches of
fixed length (no padding: every batch holds the same number of tokens, so the mean of two
half-batch token means is the token mean of the whole batch). One global batch of
``2 x BATCH x passes`` sentences per update, each rank training on its own slice of it:

* sync_<mode> (sparse_as_dense, dense): the ranks start from different seeds (the broadcast must
  align them); per-step rank-local losses, final weights and optimizer variables;
* periodic_<name> (fedavg, bmuf at block momentum 0 / block lr 1, bmuf at 0.5): the ranks train
  on different data, average_every=2; the parameters right before and after each step's sync;
* accumulate: backward_passes_per_step=2, sparse_as_dense, SGD (``iterations`` counts batches,
  as on Keras 2, so update u runs at iteration 2u + 1, and Adam's bias correction would see
  that count: the reference's schedule is evaluated at 2u + 1, and SGD has no step count);
* resume_<mode>: :func:`tests.parallel.workers.resume.run_mode` (``train`` itself, stopped and
  resumed) on Keras 3;
* ref_*: rank 0 only, after everything else: one process (no Horovod), the same start and the
  same schedule, one step per global batch.

``KERAS3_TFNMT_PLANT=1`` plants the trap in the sync scenarios (the trainer's Horovod wrapper
replaced by the plain optimizer: trains, never averages); the tests must then fail.

Writes ``<out>/rank<r>.json`` (results) and ``<out>/rank<r>.npz`` (weights).
"""
import os
import sys
import time
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # repo root, when not installed

import numpy as np  # noqa: E402

from tests.parallel.workers import run_rank  # noqa: E402
from tf_nmt.compat import KERAS_VERSION, keras, keras_name, tf  # noqa: E402
from tf_nmt.config import load_config  # noqa: E402
from tf_nmt.distributed import comm  # noqa: E402
from tf_nmt.distributed.comm import wiring  # noqa: E402
from tf_nmt.distributed.context import SINGLE  # noqa: E402
from tf_nmt.training import schedules  # noqa: E402
from tf_nmt.training.trainer import build_and_compile, validate_config  # noqa: E402

PLANT_VAR = "KERAS3_TFNMT_PLANT"
VOCAB, SRC_LEN, TGT_LEN = 40, 5, 6
BATCH, UPDATES = 4, 6  # sentences per rank and pass; optimizer updates per scenario
TINY = ["model.kind=transformer", "model.num_layers=1", "model.d_model=16", "model.num_heads=2",
        "model.ff_dim=32", "model.dropout=0.0", "train.warmup_steps=4", "train.peak_lr=0.01",
        "train.seed=7", "train.loss_kernel=tf"]
ADAM = ["train.epsilon=1e-3"]  # see the test's docstring
SYNC_MODES = ("sparse_as_dense", "dense")
PERIODIC = {"fedavg": ["train.comm=fedavg", "train.average_every=2"],
            "bmuf_m0_lr1": ["train.comm=bmuf", "train.average_every=2",
                            "train.bmuf_block_momentum=0.0", "train.bmuf_block_lr=1.0"],
            "bmuf_m0.5": ["train.comm=bmuf", "train.average_every=2",
                          "train.bmuf_block_momentum=0.5"]}
PERIODIC_UPDATES = 4
RESUME_MODES = ("sparse_as_dense", "bmuf")
ACCUMULATE = ["train.comm=sparse_as_dense", "train.optimizer=sgd"]


def config(extra: List[str]):
    return load_config(None, TINY + ([] if "train.optimizer=sgd" in extra else ADAM) + list(extra))


def global_batches(seed: int, updates: int, rows: int):
    """``updates`` global batches of ``rows`` sentences: (source, target_in, target_out)."""
    rng = np.random.default_rng(seed)
    src = rng.integers(4, VOCAB, (updates, rows, SRC_LEN)).astype("int32")
    tgt = rng.integers(4, VOCAB, (updates, rows, TGT_LEN + 1)).astype("int32")
    return src, tgt[..., :-1], tgt[..., 1:]


def rank_batches(data, rank: int, size: int, passes: int = 1):
    """Rank ``rank``'s batches, in training order: for every update its ``passes`` slices of
    BATCH sentences of the global batch (slices r * passes .. r * passes + passes - 1)."""
    out = []
    for part in data:
        per = [part[:, (rank * passes + p) * BATCH:(rank * passes + p + 1) * BATCH]
               for p in range(passes)]
        out.append(np.stack(per, axis=1).reshape((-1, BATCH) + part.shape[2:]))
    return out


def dataset(src, tin, tout) -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices(({"source": src, "target_in": tin}, tout))


class AtPasses(keras.optimizers.schedules.LearningRateSchedule):
    """``schedule`` at the iteration count the k-th pass of update ``step`` has (``k*step+k-1``)."""

    def __init__(self, schedule, k: int):
        self.schedule, self.k = schedule, k

    def __call__(self, step):
        return self.schedule(step * self.k + self.k - 1)


class StepLosses(keras.callbacks.Callback):
    """Each batch's own loss (Keras 3's batch logs hold the running mean of the epoch)."""

    def __init__(self):
        super().__init__()
        self.means: List[float] = []

    def on_train_batch_end(self, batch, logs=None):
        self.means.append(float(logs["loss"]))

    def losses(self) -> List[float]:
        m = np.asarray(self.means, np.float64)
        t = np.arange(1, len(m) + 1)
        return (t * m - np.concatenate([[0.0], (t * m)[:-1]])).tolist()


class Snapshot(keras.callbacks.Callback):
    """The parameters at every batch end (its place in the list decides before/after a sync)."""

    def __init__(self):
        super().__init__()
        self.snapshots: List[np.ndarray] = []

    def on_train_batch_end(self, batch, logs=None):
        self.snapshots.append(flat(self.model))


def flat(model) -> np.ndarray:
    return np.concatenate([np.asarray(w, np.float64).ravel() for w in model.get_weights()])


def build(cfg, ctx, seed: int, schedule=None):
    keras.utils.set_random_seed(seed)
    return build_and_compile(cfg, VOCAB, ctx, schedule=schedule)


def fit(model, cfg, ctx, batches, extra=(), before_sync=None):
    """``model.fit`` over ``batches`` with the mode's callbacks first, as the trainer does."""
    callbacks = comm.comm_callbacks(validate_config(cfg).comm, ctx, log=lambda _m: None)
    if before_sync is not None:
        at = next(i for i, c in enumerate(callbacks) if type(c).__name__ == "PeriodicSync")
        callbacks.insert(at, before_sync)
    losses = StepLosses()
    model.fit(dataset(*batches), epochs=1, shuffle=False, verbose=0,
              callbacks=callbacks + [losses] + list(extra))
    return losses.losses()


def sync_scenarios(ctx, arrays: Dict[str, np.ndarray]) -> dict:
    out = {}
    data = global_batches(11, UPDATES, ctx.size * BATCH)
    planted = os.environ.get(PLANT_VAR) == "1"
    real = wiring.horovod_optimizer
    for mode in SYNC_MODES:
        if planted:  # the trap: the plain optimizer, no averaging
            wiring.horovod_optimizer = lambda opt, *_a, **_k: opt
        try:
            cfg = config([f"train.comm={mode}"])
            model = build(cfg, ctx, seed=100 + ctx.rank)  # different starts: the broadcast aligns
        finally:
            wiring.horovod_optimizer = real
        arrays[f"sync_{mode}/init"] = flat(model)
        opt = model.optimizer
        losses = fit(model, cfg, ctx, rank_batches(data, ctx.rank, ctx.size))
        arrays[f"sync_{mode}/final"] = flat(model)
        arrays[f"sync_{mode}/optimizer"] = np.concatenate(
            [np.asarray(v, np.float64).ravel() for v in opt.variables])
        out[f"sync_{mode}"] = {"losses": losses, "iterations": int(opt.iterations.numpy()),
                               "optimizer_class": f"{type(opt).__module__}.{type(opt).__name__}",
                               "inner_class": type(getattr(opt, "inner_optimizer", opt)).__module__
                               + "." + type(getattr(opt, "inner_optimizer", opt)).__name__,
                               "sparse_as_dense": getattr(opt, "sparse_as_dense", None),
                               "planted": planted}
    return out


def periodic_scenarios(ctx, arrays: Dict[str, np.ndarray]) -> dict:
    out = {}
    data = global_batches(100 + ctx.rank, PERIODIC_UPDATES, BATCH)  # each rank its own data
    for name, extra in PERIODIC.items():
        cfg = config(extra)
        model = build(cfg, ctx, seed=7)
        before, after = Snapshot(), Snapshot()
        fit(model, cfg, ctx, data, extra=[after], before_sync=before)
        arrays[f"{name}/before"] = np.stack(before.snapshots)
        arrays[f"{name}/after"] = np.stack(after.snapshots)
        out[name] = {"optimizer_class": type(model.optimizer).__name__,
                     "iterations": int(model.optimizer.iterations.numpy())}
    return out


def accumulate_scenario(ctx, arrays: Dict[str, np.ndarray]) -> dict:
    cfg = config(ACCUMULATE + ["train.backward_passes_per_step=2"])
    data = global_batches(12, UPDATES // 2, ctx.size * 2 * BATCH)
    model = build(cfg, ctx, seed=7)
    arrays["accumulate/init"] = flat(model)  # rank 0's is every rank's start (broadcast)
    fit(model, cfg, ctx, rank_batches(data, ctx.rank, ctx.size, passes=2))
    arrays["accumulate/final"] = flat(model)
    opt = model.optimizer
    return {"accumulate": {"iterations": int(opt.iterations.numpy()),
                           "backward_passes": int(opt.backward_passes.numpy())}}


def resume_scenarios(ctx, out_dir: Path) -> dict:
    from tests.helpers import write_toy_data_dir  # noqa: PLC0415
    from tests.parallel.workers.resume import run_mode  # noqa: PLC0415
    from tf_nmt.data.data_dir import ensure_vocab  # noqa: PLC0415

    data = write_toy_data_dir(out_dir / f"data{ctx.rank}")  # per rank: no races on the files
    ensure_vocab(data, 320, log=lambda _m: None)
    return {f"resume_{mode}": run_mode(ctx, out_dir / "resume", data, mode)
            for mode in RESUME_MODES}


def references(ctx, arrays: Dict[str, np.ndarray]) -> dict:
    """Rank 0, one process: the distributed runs' start, one step per global batch."""
    out = {}
    schedule = lambda cfg: schedules.from_config(cfg.train, ctx.size)  # noqa: E731 - as the ranks'
    data = global_batches(11, UPDATES, ctx.size * BATCH)
    for mode in SYNC_MODES:
        cfg = config([f"train.comm={mode}"])
        model = build(cfg, SINGLE, seed=100, schedule=schedule(cfg))  # rank 0's start
        assert np.array_equal(flat(model), arrays[f"sync_{mode}/init"])
        out[f"ref_sync_{mode}"] = {"losses": fit(model, cfg, SINGLE, data)}
        arrays[f"ref_sync_{mode}/final"] = flat(model)
    cfg = config(ACCUMULATE)
    data = global_batches(12, UPDATES // 2, ctx.size * 2 * BATCH)
    model = build(cfg, SINGLE, seed=7, schedule=AtPasses(schedule(cfg), 2))
    assert np.array_equal(flat(model), arrays["accumulate/init"])
    fit(model, cfg, SINGLE, data)
    arrays["ref_accumulate/final"] = flat(model)
    return out


def work(ctx, out: Path) -> dict:
    arrays: Dict[str, np.ndarray] = {}
    res = {"keras": keras_name(), "keras_version": KERAS_VERSION,
           "env": os.environ.get("TF_NMT_KERAS")}
    start = time.perf_counter()
    log = lambda m: print(f"[rank {ctx.rank}] {time.perf_counter() - start:.0f}s {m}", flush=True)  # noqa: E731
    for name, phase in (("sync", lambda: sync_scenarios(ctx, arrays)),
                        ("periodic", lambda: periodic_scenarios(ctx, arrays)),
                        ("accumulate", lambda: accumulate_scenario(ctx, arrays)),
                        ("resume", lambda: resume_scenarios(ctx, out))):
        log(f"phase {name}")
        res.update(phase())
    if ctx.is_chief:
        log("references")
        res.update(references(ctx, arrays))
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / f"rank{ctx.rank}.npz", **arrays)
    log("done")
    return res


if __name__ == "__main__":
    run_rank(work)
