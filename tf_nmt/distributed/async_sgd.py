"""Asynchronous SGD on a TensorFlow parameter-server cluster, with server-side accumulation.

Each scheduled closure runs on whichever worker is free: it reads the parameter version (the
pull), computes a gradient on the parameters it reads from the servers, and pushes it to the
:class:`~tf_nmt.distributed.global_accumulator.GlobalAccumulator`, which applies one update per
``k`` pushes. ``synchronous=True`` schedules rounds of ``k`` closures and waits for each round
(synchronous SGD over ``k`` workers); with ``refresh_every=U`` gradients are computed on a
snapshot refreshed every U updates (artificial staleness).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List

from tf_nmt.compat import keras, tf
from tf_nmt.distributed.global_accumulator import GlobalAccumulator


def train_async(strategy, coordinator, build_model: Callable[[], keras.Model],
                loss_fn: Callable[[keras.Model, Any], tf.Tensor],
                dataset_fn: Callable[[], tf.data.Dataset],
                make_optimizer: Callable[[], keras.optimizers.Optimizer], pushes: int, k: int = 1,
                refresh_every: int = 0, synchronous: bool = False) -> Dict[str, Any]:
    """Run ``pushes`` worker steps; returns the model, per-push losses/staleness and a report."""
    if pushes < 1:
        raise ValueError(f"pushes must be >= 1, got {pushes}")
    if synchronous and pushes % k:
        raise ValueError(f"synchronous rounds of k={k} pushes need pushes divisible by k, got {pushes}")
    with strategy.scope():
        model = build_model()
        stale = build_model() if refresh_every else None
        accumulator = GlobalAccumulator(
            model.trainable_variables, make_optimizer(), k=k,
            snapshot=stale.trainable_variables if stale is not None else None,
            refresh_every=refresh_every)
    compute_model = stale if stale is not None else model
    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function
    def worker_step(it):
        def replica(batch):
            version = accumulator.pull_version()
            with tf.control_dependencies([version]):
                with tf.GradientTape() as tape:
                    loss = loss_fn(compute_model, batch)
            grads = tape.gradient(loss, compute_model.trainable_variables)
            out = accumulator.push(grads, version)
            return loss, out["staleness"], out["applied"]

        return strategy.run(replica, args=(next(it),))

    start = time.perf_counter()
    results: List[Any] = []
    if synchronous:
        for _ in range(pushes // k):
            results += [coordinator.schedule(worker_step, args=(iterator,)) for _ in range(k)]
            coordinator.join()
    else:
        results = [coordinator.schedule(worker_step, args=(iterator,)) for _ in range(pushes)]
        coordinator.join()
    seconds = time.perf_counter() - start
    fetched = [r.fetch() for r in results]
    report = accumulator.staleness_report()
    report.update(seconds=seconds, k=k, refresh_every=refresh_every, synchronous=synchronous,
                  losses=[float(loss) for loss, _, _ in fetched],
                  staleness=[int(s) for _, s, _ in fetched],
                  applied=[bool(a) for _, _, a in fetched])
    return {"model": model, "accumulator": accumulator, "report": report}
