"""Worker for tests/parallel/test_keras3_horovod.py: run under ``horovodrun -np 2`` with Keras 3
(``TF_USE_LEGACY_KERAS`` unset). Imports nothing from tf_nmt (a user's own model only).

A user's own Keras 3 model (Embedding -> Flatten -> Dense -> Dense, so the embedding gradient is
a ``tf.IndexedSlices``) is trained with plain ``model.fit`` in several scenarios, each rank on
its own data. Every rank writes ``rank<r>.json`` (results) and ``rank<r>.npz`` (weights);
rank 0 also trains the single-process references (one process fed both ranks' batches
concatenated, no collectives) after the distributed scenarios.

Scenario 7 runs Horovod's own ``horovod.tensorflow.keras`` under Keras 3 (the known trap).

``--plant`` replaces the DistributedOptimizer of the "average" scenario by the plain optimizer
(the Keras 3 trap: trains, never averages); the tests must then fail.
"""
import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # repo root, when not installed

import numpy as np  # noqa: E402

VOCAB, SEQ, CLASSES, BATCH, STEPS = 50, 6, 4, 16, 8  # BATCH: per rank and pass
LR = 0.1


def rank_data(rank: int, n: int):
    """Rank ``rank``'s own samples (different on every rank)."""
    rng = np.random.default_rng(1000 + rank)
    return (rng.integers(0, VOCAB, (n, SEQ)).astype("int32"),
            rng.integers(0, CLASSES, (n,)).astype("int32"))


def interleave(shards, batch: int):
    """Both ranks' data as one process sees it: global batch i = rank 0's batch i followed by
    rank 1's batch i (the order inside a batch does not change a mean loss)."""
    xs, ys = [], []
    n = len(shards[0][0])
    for start in range(0, n, batch):
        for x, y in shards:
            xs.append(x[start:start + batch])
            ys.append(y[start:start + batch])
    return np.concatenate(xs), np.concatenate(ys)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--plant", action="store_true")
    args = parser.parse_args()
    out = Path(args.out)

    import horovod.tensorflow as hvd
    import keras
    import tensorflow as tf

    from horovod_patches import keras3 as hk

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    res = {"rank": rank, "size": size, "keras": keras.__version__,
           "legacy_env": os.environ.get("TF_USE_LEGACY_KERAS"),
           "tf_keras_is_keras3": tf.keras.Model is keras.Model}
    arrays = {}

    def make_model(seed: int):
        keras.utils.set_random_seed(seed)
        inp = keras.Input((SEQ,), dtype="int32")
        x = keras.layers.Embedding(VOCAB, 8)(inp)
        x = keras.layers.Flatten()(x)
        x = keras.layers.Dense(16, activation="tanh")(x)
        return keras.Model(inp, keras.layers.Dense(CLASSES)(x))

    def compile_(model, optimizer):
        model.compile(optimizer=optimizer, jit_compile=False,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))

    def sgd():
        return keras.optimizers.SGD(LR, momentum=0.9)

    def weights(model):
        return [np.asarray(w) for w in model.weights]

    def store(name, model, extra=None):
        for i, w in enumerate(weights(model)):
            arrays[f"{name}/w{i}"] = w
        res[name] = {"n_weights": len(model.weights), **(extra or {})}

    class Recorder(keras.callbacks.Callback):
        """Copies the epoch logs it sees (placed before MetricAverage: the rank-local ones)."""

        def __init__(self):
            super().__init__()
            self.epochs, self.lrs = [], []

        def on_epoch_end(self, epoch, logs=None):
            self.epochs.append(dict(logs or {}))

        def on_train_batch_begin(self, batch, logs=None):
            self.lrs.append(float(np.asarray(self.model.optimizer.learning_rate)))

    x, y = rank_data(rank, BATCH * STEPS)

    # the embedding gradient really is sparse (what sparse_as_dense is about)
    probe = make_model(0)
    with tf.GradientTape() as tape:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(y[:4], probe(x[:4]))
    grads = tape.gradient(loss, probe.trainable_variables)
    res["grad_types"] = [type(g).__name__ for g in grads]

    # 1. averaging + broadcast: ranks start from DIFFERENT weights (seed 100 + rank)
    model = make_model(100 + rank)
    arrays["average/init0"] = np.asarray(model.weights[0])
    opt = sgd() if args.plant else hk.DistributedOptimizer(sgd())
    compile_(model, opt)
    local, averaged = Recorder(), Recorder()
    hist = model.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0,
                     callbacks=[local, hk.MetricAverage(), hk.BroadcastInitialState(), averaged])
    store("average", model, {"iterations": int(opt.iterations),
                             "local_loss": [e["loss"] for e in local.epochs],
                             "avg_loss": [e["loss"] for e in averaged.epochs],
                             "history_loss": hist.history["loss"]})
    for i, v in enumerate(opt.variables):
        arrays[f"average/opt{i}"] = np.asarray(v)

    # 2. sparse_as_dense=False: embedding rows allgathered as IndexedSlices
    model = make_model(100 + rank)
    compile_(model, hk.DistributedOptimizer(sgd(), sparse_as_dense=False))
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0,
              callbacks=[hk.BroadcastInitialState()])
    store("sparse", model)

    # 3. accumulation: 2 passes of BATCH // 2 per update
    model = make_model(100 + rank)
    opt = hk.DistributedOptimizer(sgd(), backward_passes_per_step=2)
    compile_(model, opt)
    model.fit(x, y, batch_size=BATCH // 2, epochs=1, shuffle=False, verbose=0,
              callbacks=[hk.BroadcastInitialState()])
    store("accumulate", model, {"iterations": int(opt.iterations),
                                "backward_passes": int(opt.backward_passes)})

    # 4. negative control: the plain optimizer (no averaging), same start
    model = make_model(100 + rank)
    compile_(model, sgd())
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0,
              callbacks=[hk.BroadcastInitialState()])
    store("plain", model)

    # 5. negative control: averaging without the broadcast keeps different starts apart
    model = make_model(100 + rank)
    compile_(model, hk.DistributedOptimizer(sgd()))
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    store("no_broadcast", model)

    # 6. learning-rate warm-up to LR over 4 updates, from LR / size
    model = make_model(100 + rank)
    compile_(model, hk.DistributedOptimizer(keras.optimizers.SGD(LR)))
    rec = Recorder()
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0,
              callbacks=[hk.BroadcastInitialState(), hk.LearningRateWarmup(LR, warmup_steps=4),
                         rec])
    res["warmup_lrs"] = rec.lrs

    # 7. the upstream trap itself: horovod.tensorflow.keras (Horovod 0.28.1) under Keras 3
    import horovod.tensorflow.keras as upstream

    model = make_model(100)  # the same start on every rank, no broadcast needed
    compile_(model, upstream.DistributedOptimizer(sgd()))
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    store("upstream", model)
    try:
        model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0,
                  callbacks=[upstream.callbacks.BroadcastGlobalVariablesCallback(0)])
        res["upstream_broadcast_error"] = None
    except Exception as err:  # noqa: BLE001 - recorded for the test
        res["upstream_broadcast_error"] = f"{type(err).__name__}: {err}"

    # single-process references on rank 0: both shards concatenated, plain optimizer
    if rank == 0:
        shards = [rank_data(r, BATCH * STEPS) for r in range(size)]
        gx, gy = interleave(shards, BATCH)
        ref = make_model(100)  # rank 0's initial weights, which the broadcast gave every rank
        compile_(ref, sgd())
        h = ref.fit(gx, gy, batch_size=BATCH * size, epochs=2, shuffle=False, verbose=0)
        store("ref_average", ref, {"loss": h.history["loss"]})
        ref = make_model(100)
        compile_(ref, sgd())
        ref.fit(gx, gy, batch_size=BATCH * size, epochs=1, shuffle=False, verbose=0)
        # also the accumulation reference: an update of 2 passes x BATCH // 2 on each rank uses
        # the samples of one global batch of BATCH * size here
        store("ref_one_epoch", ref)

    (out / f"rank{rank}.json").write_text(json.dumps(res))
    np.savez(out / f"rank{rank}.npz", **arrays)


if __name__ == "__main__":
    main()
