"""Data-parallel training of your own Keras 3 model with plain ``model.fit`` under Horovod.

Run (Keras 3: leave ``TF_USE_LEGACY_KERAS`` unset; ``--gloo`` or ``--mpi``)::

    horovodrun -np 2 -H localhost:2 --gloo python horovod_patches/keras3/examples/train_mnist_like.py

The data are synthetic "MNIST-like" 28x28 images of 10 classes (each class a fixed random
template plus noise), so nothing is downloaded; each rank makes its own shard. The recipe:

1. ``hvd.init()``; each rank reads its own part of the data;
2. scale the learning rate by the number of ranks (the global batch is ``size`` x larger);
3. wrap the optimizer in ``DistributedOptimizer`` and compile with ``jit_compile=False``
   (Horovod's ops have no XLA kernels; Keras 3 turns XLA on by itself on GPU machines);
4. callbacks: ``MetricAverage`` first, ``BroadcastInitialState``, ``LearningRateWarmup``;
5. save only on rank 0.
"""
import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # repo root, when not installed

import numpy as np  # noqa: E402


def synthetic_digits(n: int, seed: int):
    """``n`` 28x28x1 float images in 10 classes: class template + Gaussian noise."""
    templates = np.random.default_rng(0).normal(size=(10, 28, 28, 1)).astype("float32")
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n)
    images = templates[labels] + rng.normal(scale=2.0, size=(n, 28, 28, 1)).astype("float32")
    return images, labels.astype("int32")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--samples", type=int, default=4096, help="per rank")
    parser.add_argument("--lr", type=float, default=1e-3, help="single-worker learning rate")
    parser.add_argument("--accumulate", type=int, default=1, help="backward passes per update")
    parser.add_argument("--save", default="", help="rank 0 saves the model here (.keras)")
    args = parser.parse_args()

    if os.environ.get("TF_USE_LEGACY_KERAS") in ("1", "true", "True"):
        print("note: TF_USE_LEGACY_KERAS is set; this example uses `import keras` (Keras 3)")

    import horovod.tensorflow as hvd
    import keras

    from horovod_patches import keras3 as hvd_keras3

    hvd.init()
    x, y = synthetic_digits(args.samples, seed=1 + hvd.rank())  # this rank's shard

    model = keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(16, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10),
    ])
    scaled_lr = args.lr * hvd.size()
    optimizer = hvd_keras3.DistributedOptimizer(keras.optimizers.Adam(scaled_lr),
                                                backward_passes_per_step=args.accumulate)
    model.compile(optimizer=optimizer, jit_compile=False, metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    callbacks = [
        hvd_keras3.MetricAverage(),  # first: later callbacks see the averaged logs
        hvd_keras3.BroadcastInitialState(root_rank=0),
        hvd_keras3.LearningRateWarmup(scaled_lr, warmup_epochs=1),
    ]
    history = model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs,
                        callbacks=callbacks, verbose=2 if hvd.rank() == 0 else 0)
    if hvd.rank() == 0:
        print(f"ranks={hvd.size()} final loss={history.history['loss'][-1]:.4f} "
              f"accuracy={history.history['accuracy'][-1]:.4f} (averaged over ranks) "
              f"updates={int(optimizer.iterations)}")
        if args.save:
            model.save(args.save)


if __name__ == "__main__":
    main()
