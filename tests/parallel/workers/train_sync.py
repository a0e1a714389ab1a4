"""Worker for tests/parallel: run under ``horovodrun -np 2``; writes ``<out>/rank<r>.json``.

Phases (one launch, to pay TensorFlow's start-up once):
* equivalence — same init on every rank, rank-specific batches, model.fit with the SGD that
  ``comm.wrap_optimizer`` makes (tf_keras current and legacy optimizers), train.comm
  sparse_as_dense and dense; rank 0 also trains
  a plain single-process copy on the union batches (the reference).
* accumulate — the same with backward_passes_per_step=2 (legacy SGD, as the trainer uses).
* tape — the same equivalence with a custom loop and ``horovod_tape``.
* sync — different init seeds per rank, model.fit + ``horovod_callbacks``: the broadcast must
  leave identical parameters, and the metric averaging identical epoch logs.
"""
import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # repo root, when not installed

from tf_nmt import distributed  # noqa: E402
from tf_nmt.compat import keras, tf  # noqa: E402
from tf_nmt.distributed import comm  # noqa: E402
from tf_nmt.distributed.comm.horovod import horovod_callbacks, horovod_tape  # noqa: E402

VOCAB, DIM, CLASSES, LENGTH = 23, 4, 3, 5
STEPS, PER_RANK_BATCH, LR = 4, 6, 0.5


def make_model(seed: int) -> keras.Model:
    keras.utils.set_random_seed(seed)  # Python, NumPy and TF seeds (initializers use all)
    # Fixed layer names: Horovod matches collectives across ranks by tensor name, and rank 0
    # builds extra (reference) models that would otherwise shift the auto-generated names.
    model = keras.Sequential([
        keras.layers.Embedding(VOCAB, DIM, name="embedding"),
        keras.layers.GlobalAveragePooling1D(name="pool"),
        keras.layers.Dense(CLASSES, name="dense"),
    ], name="tiny")
    model.build((None, LENGTH))
    return model


def global_batches(size: int):
    """STEPS global batches of size * PER_RANK_BATCH examples, identical on every rank."""
    rng = tf.random.Generator.from_seed(1234)
    x = rng.uniform([STEPS, size * PER_RANK_BATCH, LENGTH], 0, VOCAB, dtype=tf.int32)
    y = rng.uniform([STEPS, size * PER_RANK_BATCH], 0, CLASSES, dtype=tf.int32)
    return x, y


def rank_slice(t, rank: int):
    """Rank ``rank``'s part of every global batch, flattened step-major for model.fit."""
    part = t[:, rank * PER_RANK_BATCH:(rank + 1) * PER_RANK_BATCH]
    return tf.reshape(part, [-1] + part.shape[2:].as_list())


def weights(model) -> list:
    return [w.numpy().ravel().tolist() for w in model.weights]


def loss_fn():
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def fit(model, opt, x, y, batch, callbacks=()):
    model.compile(optimizer=opt, loss=loss_fn())
    hist = model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0,
                     callbacks=list(callbacks))
    return {k: [float(v) for v in vals] for k, vals in hist.history.items()}


def equivalence(ctx, sparse_as_dense: bool, legacy: bool = False, passes: int = 1) -> dict:
    """``passes`` > 1: gradient accumulation; the reference then steps on ``passes`` global
    batches at once."""
    x, y = global_batches(ctx.size)
    sgd = keras.optimizers.legacy.SGD if legacy else keras.optimizers.SGD
    model = make_model(seed=7)
    distributed.broadcast_variables(model.variables, ctx)  # identical start on every rank
    initial = model.get_weights()
    settings = comm.CommSettings(mode="sparse_as_dense" if sparse_as_dense else "dense")
    opt = comm.wrap_optimizer(sgd(LR), settings, ctx, backward_passes_per_step=passes)
    fit(model, opt, rank_slice(x, ctx.rank), rank_slice(y, ctx.rank), PER_RANK_BATCH)
    out = {"params": weights(model), "optimizer_class": type(opt).__name__,
           "is_tf_keras": isinstance(opt, (keras.optimizers.Optimizer,
                                           keras.optimizers.legacy.Optimizer)),
           "wrapped": hasattr(opt, "_allreduce_grads"), "iterations": int(opt.iterations.numpy())}
    if ctx.is_chief:
        ref = make_model(seed=7)
        ref.set_weights(initial)
        union_x = tf.reshape(x, [-1, LENGTH])
        union_y = tf.reshape(y, [-1])
        fit(ref, keras.optimizers.SGD(LR), union_x, union_y, passes * ctx.size * PER_RANK_BATCH)
        out["reference"] = weights(ref)
        out["initial"] = [w.ravel().tolist() for w in initial]
    return out


def tape_equivalence(ctx) -> dict:
    x, y = global_batches(ctx.size)
    model, opt, loss = make_model(seed=7), keras.optimizers.SGD(LR), loss_fn()
    distributed.broadcast_variables(model.variables, ctx)
    initial = weights(model)
    grad_kinds = set()
    for step in range(STEPS):
        xs = x[step, ctx.rank * PER_RANK_BATCH:(ctx.rank + 1) * PER_RANK_BATCH]
        ys = y[step, ctx.rank * PER_RANK_BATCH:(ctx.rank + 1) * PER_RANK_BATCH]
        with tf.GradientTape() as tape:
            value = loss(ys, model(xs, training=True))
        local = tape.gradient(value, model.trainable_variables)
        grad_kinds.update(type(g).__name__ for g in local)
        with tf.GradientTape() as tape:
            value = loss(ys, model(xs, training=True))
        grads = horovod_tape(tape, ctx, sparse_as_dense=True).gradient(value, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
    return {"initial": initial, "params": weights(model), "local_grad_types": sorted(grad_kinds)}


def sync(ctx) -> dict:
    x, y = global_batches(ctx.size)
    model = make_model(seed=100 + ctx.rank)  # deliberately different initial weights
    initial = weights(model)
    opt = comm.wrap_optimizer(keras.optimizers.SGD(LR), comm.CommSettings(), ctx)
    history = fit(model, opt, rank_slice(x, ctx.rank), rank_slice(y, ctx.rank), PER_RANK_BATCH,
                  callbacks=horovod_callbacks(ctx))
    local_loss = float(loss_fn()(rank_slice(y, ctx.rank), model(rank_slice(x, ctx.rank))))
    return {"initial": initial, "params": weights(model), "history": history,
            "local_loss": local_loss,
            "optimizer_weights": [w.numpy().ravel().tolist() for w in opt.variables]}


def log(ctx, msg: str) -> None:
    print(f"[rank {ctx.rank}] {msg}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    ctx = distributed.init(enabled=True)
    result = {"rank": ctx.rank, "size": ctx.size, "local_rank": ctx.local_rank,
              "env_rank": {k: v for k, v in os.environ.items()
                           if k in ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK")},
              "gloo": bool(ctx.hvd.gloo_enabled()), "mpi": bool(ctx.hvd.mpi_enabled()),
              "cycle_time": os.environ.get("HOROVOD_CYCLE_TIME")}
    phases = {"dense": lambda: equivalence(ctx, sparse_as_dense=True),
              "sparse": lambda: equivalence(ctx, sparse_as_dense=False),
              "legacy_dense": lambda: equivalence(ctx, sparse_as_dense=True, legacy=True),
              "legacy_sparse": lambda: equivalence(ctx, sparse_as_dense=False, legacy=True),
              "accumulate": lambda: equivalence(ctx, sparse_as_dense=True, legacy=True, passes=2),
              "tape": lambda: tape_equivalence(ctx), "sync": lambda: sync(ctx)}
    for name, phase in phases.items():
        log(ctx, f"phase {name}")
        result[name] = phase()
    log(ctx, "done")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.out, f"rank{ctx.rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
