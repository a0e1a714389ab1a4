"""Worker for tests/parallel/test_comm_modes.py: run under ``horovodrun -np 2``; writes
``<out>/rank<r>.json``. Tiny tf_keras models (Embedding → pooling → Dense, legacy SGD).

Phases (one launch, to pay TensorFlow's start-up once):
* r0 — Horovod dense allreduce vs graddrop at R = 0 (with and without local gradients):
  same init, rank-specific batches, model.fit; final parameters.
* mass — the exchange called directly for a few steps at R = 0.9: per rank the summed local
  gradients, the summed applied updates and the final residual (error feedback on and off).
* average — fedavg and graddrop+local with P = 2: parameters before and after each step's sync.
* bmuf — BMUF (block momentum 0, block LR 1, and 0.5/1) vs fedavg with P = 2; final parameters.
* bytes — graddrop at R = 0.99 (float and 1-bit values) on a 68k-parameter model: CommStats.
* fallback — the exchange called directly through a linear drop warm-up (R = 0.2475, 0.495,
  0.7425, 0.99) with and without the dense fallback: per step the update, residual and stats.
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # repo root, when not installed

import numpy as np  # noqa: E402

from tf_nmt import distributed  # noqa: E402
from tf_nmt.compat import keras, tf  # noqa: E402
from tf_nmt.distributed import comm  # noqa: E402
from tf_nmt.distributed.comm.callbacks import PeriodicSync  # noqa: E402
from tf_nmt.distributed.comm.graddrop import GradDropExchange, horovod_gather, horovod_sum  # noqa: E402

LENGTH, CLASSES, STEPS, BATCH, LR = 5, 3, 4, 6, 0.5


def make_model(vocab: int = 23, dim: int = 4, seed: int = 7) -> keras.Model:
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.layers.Embedding(vocab, dim, name="embedding"),
                              keras.layers.GlobalAveragePooling1D(name="pool"),
                              keras.layers.Dense(CLASSES, name="dense")], name="tiny")
    model.build((None, LENGTH))
    return model


def rank_data(ctx, vocab: int = 23, steps: int = STEPS):
    rng = np.random.default_rng(1000 + ctx.rank)
    return (rng.integers(0, vocab, size=(steps * BATCH, LENGTH)),
            rng.integers(0, CLASSES, size=steps * BATCH))


def flat(model) -> list:
    return np.concatenate([w.ravel() for w in model.get_weights()]).astype(float).tolist()


class Snapshot(keras.callbacks.Callback):
    """Parameters at every batch end (where it sits in the callback list decides before/after)."""

    def __init__(self):
        super().__init__()
        self.snapshots = []

    def on_train_batch_end(self, batch, logs=None):
        self.snapshots.append(flat(self.model))


def fit(ctx, settings, vocab=23, dim=4, steps=STEPS, extra=(), before_sync=None):
    model = make_model(vocab, dim)
    opt = comm.wrap_optimizer(keras.optimizers.legacy.SGD(LR), settings, ctx)
    model.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    callbacks = comm.comm_callbacks(settings, ctx, log=lambda _m: None)
    if before_sync is not None:  # just before the periodic sync (or the statistics)
        at = next(i for i, c in enumerate(callbacks) if type(c).__name__ in ("PeriodicSync", "CommStats"))
        callbacks.insert(at, before_sync)
    x, y = rank_data(ctx, vocab, steps)
    model.fit(x, y, batch_size=BATCH, shuffle=False, verbose=0, callbacks=callbacks + list(extra))
    stats = next(c for c in callbacks if type(c).__name__ == "CommStats").summary()
    return model, stats


def graddrop(**kw):
    base = dict(mode="graddrop", drop_warmup_steps=0)
    base.update(kw)
    return comm.CommSettings(**base)


def phase_r0(ctx) -> dict:
    out = {}
    for name, settings in (("dense", comm.CommSettings(mode="sparse_as_dense")),
                           ("horovod_sparse", comm.CommSettings(mode="dense")),
                           ("graddrop", graddrop(drop_ratio=0.0)),
                           ("graddrop_local", graddrop(drop_ratio=0.0, local_gradients=True,
                                                       average_every=3)),
                           ("graddrop_per_tensor", graddrop(drop_ratio=0.0, per_tensor=True))):
        model, _ = fit(ctx, settings)
        out[name] = flat(model)
    out["initial"] = flat(make_model())
    return out


def phase_mass(ctx) -> dict:
    shapes = [(30, 8), (8,), (12, 5)]
    out = {}
    for feedback in (True, False):
        settings = graddrop(drop_ratio=0.9, error_feedback=feedback)
        ex = GradDropExchange(settings, shapes, ctx.size, horovod_gather(ctx.hvd), seed=ctx.rank)
        residuals = [tf.Variable(tf.zeros(s)) for s in shapes] if feedback else None
        rng = np.random.default_rng(50 + ctx.rank)
        step_fn = tf.function(lambda g, step: ex.exchange(g, residuals, step))
        local_sum, applied_sum = 0.0, 0.0
        for step in range(5):
            g = [tf.constant(rng.normal(size=s).astype(np.float32)) for s in shapes]
            update = step_fn(g, tf.constant(step, tf.int64))
            local_sum = local_sum + np.concatenate([t.numpy().ravel() for t in g]).astype(np.float64)
            applied_sum = applied_sum + np.concatenate([u.numpy().ravel() for u in update]).astype(np.float64)
        residual = (np.concatenate([r.numpy().ravel() for r in residuals]) if feedback
                    else np.zeros_like(local_sum))
        out["feedback" if feedback else "no_feedback"] = {
            "local_sum": local_sum.tolist(), "applied_sum": applied_sum.tolist(),
            "residual": residual.astype(float).tolist()}
    return out


def phase_average(ctx) -> dict:
    out = {}
    for name, settings in (("fedavg", comm.CommSettings(mode="fedavg", average_every=2)),
                           ("graddrop_local", graddrop(drop_ratio=0.5, local_gradients=True,
                                                       average_every=2))):
        before, after = Snapshot(), Snapshot()
        fit(ctx, settings, before_sync=before, extra=[after])
        out[name] = {"before": before.snapshots, "after": after.snapshots}
    return out


def phase_bmuf(ctx) -> dict:
    out = {}
    for name, settings in (
            ("fedavg", comm.CommSettings(mode="fedavg", average_every=2)),
            ("bmuf_m0_lr1", comm.CommSettings(mode="bmuf", average_every=2, block_momentum=0.0,
                                              block_lr=1.0)),
            ("bmuf_m0.5", comm.CommSettings(mode="bmuf", average_every=2, block_momentum=0.5))):
        model, _ = fit(ctx, settings, steps=6)
        out[name] = flat(model)
    return out


def phase_bytes(ctx) -> dict:
    out = {}
    for name, settings in (("float", graddrop(drop_ratio=0.99)),
                           ("one_bit", graddrop(drop_ratio=0.99, one_bit=True))):
        _, stats = fit(ctx, settings, vocab=2000, dim=32, steps=3)
        stats.pop("per_step")
        out[name] = stats
    return out


def phase_fallback(ctx) -> dict:
    shapes = [(30, 8), (8,), (12, 5)]
    out = {}
    for fallback in (True, False):
        settings = graddrop(drop_ratio=0.99, drop_warmup_steps=4)
        ex = GradDropExchange(settings, shapes, ctx.size, horovod_gather(ctx.hvd), seed=ctx.rank,
                              reduce=horovod_sum(ctx.hvd), dense_fallback=fallback)
        residuals = [tf.Variable(tf.zeros(s)) for s in shapes]
        rng = np.random.default_rng(70 + ctx.rank)
        step_fn = tf.function(lambda g, step: ex.exchange(g, residuals, step))
        steps = []
        for step in range(4):
            g = [tf.constant(rng.normal(size=s).astype(np.float32)) for s in shapes]
            update = step_fn(g, tf.constant(step, tf.int64))
            steps.append({"update": np.concatenate([u.numpy().ravel() for u in update]).astype(float).tolist(),
                          "residual": np.concatenate([r.numpy().ravel() for r in residuals]).astype(float).tolist(),
                          **ex.step_stats()})
        out["on" if fallback else "off"] = steps
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    ctx = distributed.init(enabled=True)
    result = {"rank": ctx.rank, "size": ctx.size}
    for name, phase in (("r0", phase_r0), ("mass", phase_mass), ("average", phase_average),
                        ("bmuf", phase_bmuf), ("bytes", phase_bytes), ("fallback", phase_fallback)):
        print(f"[rank {ctx.rank}] phase {name}", flush=True)
        result[name] = phase(ctx)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.out, f"rank{ctx.rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
