"""Worker for the mixed-precision tests of tests/parallel/test_keras3_horovod.py: Keras 3
(``TF_NMT_KERAS=3``, ``TF_USE_LEGACY_KERAS`` unset) under ``horovodrun -np 2``.

Float16 overflow on ONE rank: at batch :data:`OVERFLOW_AT` rank 1 multiplies its loss by
:data:`BOOST` (a variable a callback sets), so its float16 backward pass overflows to inf while
rank 0's gradients stay finite. Scenarios (each rank its own data):

* fp16_user: a user's own model (Embedding -> Dense in float16, float32 logits),
  ``horovod_patches.keras3.LossScaleOptimizer(DistributedOptimizer(SGD))``, different starts
  aligned by ``BroadcastInitialState``; ``dynamic_growth_steps`` small enough that the scale
  also grows during the run;
* fp16_accumulate: the same with ``backward_passes_per_step=2``;
* fp16_tfnmt: tf-nmt's Transformer through the trainer's ``build_and_compile`` with the
  ``mixed_float16`` policy (sparse_as_dense), recompiled with the same optimizer and the boosted
  loss, trained with the mode's callbacks;
* bf16_user / bf16_tfnmt: ``mixed_bfloat16`` (no loss scaling, no overflow planted),
  different starts on the user model, both trained to identical ranks.

Per batch every rank records ``iterations``, the loss scale and the running mean loss. Writes
``<out>/rank<r>.json`` and ``<out>/rank<r>.npz`` (final weights; optimizer variables, one
entry each, named by index and path).

``KERAS3_FP16_PLANT``: ``stock`` replaces the ranks' agreed overflow check with Keras 3's own
(per rank, before the allreduce: the defect this guards); ``nocount`` stops tf-nmt's loss scale
counting a skipped step in ``iterations``. The tests must then fail.
"""
import os
import sys
from pathlib import Path
from typing import Dict

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # repo root, when not installed

import numpy as np  # noqa: E402

from tests.parallel.workers import run_rank  # noqa: E402

PLANT_VAR = "KERAS3_FP16_PLANT"
VOCAB, SEQ, CLASSES, BATCH, STEPS = 50, 6, 4, 8, 8
OVERFLOW_AT = 3       # the batch (0-based) whose loss rank 1 boosts
BOOST = 1e8           # x the 2**15 loss scale: far past float16's 65504 in the backward pass
GROWTH_STEPS = 2      # the scale doubles after 2 finite steps
LR = 0.05


def work(ctx, out: Path) -> dict:
    import keras
    import tensorflow as tf

    from horovod_patches import keras3 as hk
    from tests.parallel.workers.keras3_tfnmt import (BATCH as NMT_BATCH, VOCAB as NMT_VOCAB,
                                                     config, dataset, global_batches,
                                                     rank_batches)
    from tf_nmt.distributed import comm
    from tf_nmt.training.trainer import build_and_compile, validate_config

    plant = os.environ.get(PLANT_VAR, "")
    if plant == "stock":  # Keras 3's check: this rank's gradients only
        hk.LossScaleOptimizer.check_finite = keras.optimizers.LossScaleOptimizer.check_finite
    elif plant == "nocount":
        hk.LossScaleOptimizer._stateful_handle_non_finite_grads = (
            keras.optimizers.LossScaleOptimizer._stateful_handle_non_finite_grads)
    rank = ctx.rank
    res: dict = {"keras": keras.__version__, "plant": plant}
    arrays: Dict[str, np.ndarray] = {}
    boost = tf.Variable(1.0, trainable=False, dtype=tf.float32)

    class Overflow(keras.callbacks.Callback):
        """Rank 1's loss x BOOST at batch OVERFLOW_AT of the first epoch, x 1 otherwise."""

        def on_train_batch_begin(self, batch, logs=None):
            boost.assign(BOOST if rank == 1 and batch == OVERFLOW_AT else 1.0)

    class Record(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.steps = {"iterations": [], "scale": [], "loss_mean": []}

        def on_train_batch_end(self, batch, logs=None):
            opt = self.model.optimizer
            self.steps["iterations"].append(int(opt.iterations.numpy()))
            scale = getattr(opt, "dynamic_scale", None)
            self.steps["scale"].append(None if scale is None else float(scale.numpy()))
            self.steps["loss_mean"].append(float(logs["loss"]))

    def store(name, model, record, extra=None):
        arrays[f"{name}/weights"] = np.concatenate(
            [np.asarray(w, np.float64).ravel() for w in model.weights])
        for i, v in enumerate(model.optimizer.variables):  # the test reads the kind from the path
            arrays[f"{name}/optimizer/{i}/{v.path.replace('/', '.')}"] = np.asarray(v)
        opt = model.optimizer
        inner = getattr(opt, "inner_optimizer", None)
        res[name] = {**record.steps, "class": f"{type(opt).__module__}.{type(opt).__name__}",
                     "inner_class": None if inner is None else type(inner).__name__,
                     **(extra or {})}

    def boosted(loss):
        def fn(y_true, y_pred):
            return loss(y_true, y_pred) * boost
        return fn

    def user_model(seed: int, policy: str):
        keras.mixed_precision.set_global_policy(policy)
        keras.utils.set_random_seed(seed)
        inp = keras.Input((SEQ,), dtype="int32")
        x = keras.layers.Embedding(VOCAB, 8)(inp)
        x = keras.layers.Flatten()(x)
        x = keras.layers.Dense(16, activation="tanh")(x)
        model = keras.Model(inp, keras.layers.Dense(CLASSES, dtype="float32")(x))
        keras.mixed_precision.set_global_policy("float32")
        return model

    rng = np.random.default_rng(1000 + rank)
    x = rng.integers(0, VOCAB, (BATCH * STEPS, SEQ)).astype("int32")
    y = rng.integers(0, CLASSES, (BATCH * STEPS,)).astype("int32")
    sce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def fit_user(name, policy, optimizer, batch=BATCH):
        model = user_model(100 + rank, policy)  # different starts: the broadcast aligns them
        res[f"{name}_compute_dtype"] = model.layers[2].compute_dtype
        model.compile(optimizer=optimizer, loss=boosted(sce), jit_compile=False)
        record = Record()
        overflow = [Overflow()] if policy == "mixed_float16" else []
        model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0,
                  callbacks=[hk.BroadcastInitialState()] + overflow + [record])
        store(name, model, record)
        return model

    def sgd():
        return keras.optimizers.SGD(LR, momentum=0.9)

    fit_user("fp16_user", "mixed_float16", hk.LossScaleOptimizer(
        hk.DistributedOptimizer(sgd()), dynamic_growth_steps=GROWTH_STEPS))
    acc = hk.DistributedOptimizer(sgd(), backward_passes_per_step=2)
    fit_user("fp16_accumulate", "mixed_float16",
             hk.LossScaleOptimizer(acc, dynamic_growth_steps=GROWTH_STEPS), batch=BATCH // 2)
    res["fp16_accumulate"]["backward_passes"] = int(acc.backward_passes.numpy())
    fit_user("bf16_user", "mixed_bfloat16", hk.DistributedOptimizer(sgd()))

    # tf-nmt's trainer: build_and_compile picks the loss scale for a distributed Keras 3 run
    data = global_batches(11, STEPS, ctx.size * NMT_BATCH)
    batches = rank_batches(data, rank, ctx.size)
    for name, policy in (("fp16_tfnmt", "mixed_float16"), ("bf16_tfnmt", "mixed_bfloat16")):
        # the C++ kernels take float32/bfloat16; float16 runs where they are not chosen (GPUs)
        cfg = config(["train.comm=sparse_as_dense", "train.norm_kernel=tf",
                      "train.dropout_kernel=tf"])
        keras.utils.set_random_seed(7)
        model = build_and_compile(cfg, NMT_VOCAB, ctx, policy=policy)
        res[f"{name}_compute_dtype"] = model.compute_dtype
        model.compile(optimizer=model.optimizer, loss=boosted(model.loss), jit_compile=False)
        record = Record()
        callbacks = comm.comm_callbacks(validate_config(cfg).comm, ctx, log=lambda _m: None)
        overflow = [Overflow()] if policy == "mixed_float16" else []
        model.fit(dataset(*batches), epochs=1, shuffle=False, verbose=0,
                  callbacks=callbacks + overflow + [record])
        store(name, model, record)
        keras.mixed_precision.set_global_policy("float32")
    # what a saved model would restore
    copy = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(
        hk.LossScaleOptimizer(hk.DistributedOptimizer(sgd()), initial_scale=2.0 ** 10,
                              count_skipped_steps=True)))
    res["restored"] = {"class": f"{type(copy).__module__}.{type(copy).__name__}",
                       "inner": type(copy.inner_optimizer).__name__,
                       "count_skipped_steps": copy.count_skipped_steps,
                       "initial_scale": copy.initial_scale}
    refused = []
    for bad in (lambda: hk.LossScaleOptimizer("sgd"),
                lambda: hk.LossScaleOptimizer(keras.optimizers.LossScaleOptimizer(sgd()))):
        try:
            bad()
            refused.append(None)
        except (TypeError, ValueError) as err:
            refused.append(f"{type(err).__name__}: {err}")
    res["refused"] = refused

    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / f"rank{rank}.npz", **arrays)
    return res


if __name__ == "__main__":
    run_rank(work)
