"""Asynchronous SGD on a TensorFlow parameter-server cluster, with server-side accumulation.

Each scheduled closure runs on whichever worker is free: it reads the parameter version (the
pull), computes a gradient on the parameters it reads from the servers, and pushes it to the
:class:`~tf_nmt.distributed.global_accumulator.GlobalAccumulator`, which applies one update per
``k`` pushes. ``synchronous=True`` schedules rounds of ``k`` closures and waits for each round
(synchronous SGD over ``k`` workers); with ``refresh_every=U`` gradients are computed on a
snapshot refreshed every U updates (artificial staleness).

With ``n_push``/``n_fetch`` > 1 (or ``clip_norm``) a scheduled closure is one *Downpour* worker
step instead (:mod:`tf_nmt.distributed.downpour`): the worker fetches every ``n_fetch`` of its
steps and pushes the mean of ``n_push`` local gradients, so a push costs ``n_push`` closures.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional

from tf_nmt.compat import keras, tf
from tf_nmt.distributed.downpour import DownpourWorkers
from tf_nmt.distributed.downpour import requested as downpour_requested
from tf_nmt.distributed.global_accumulator import GlobalAccumulator


def train_async(strategy, coordinator, build_model: Callable[[], keras.Model],
                loss_fn: Callable[[keras.Model, Any], tf.Tensor],
                dataset_fn: Callable[[], tf.data.Dataset],
                make_optimizer: Callable[[], keras.optimizers.Optimizer], pushes: int, k: int = 1,
                refresh_every: int = 0, synchronous: bool = False, n_push: int = 1,
                n_fetch: int = 1, clip_norm: float = 0.0, num_workers: int = 0,
                log: Optional[Callable[[str], None]] = None,
                progress_every: float = 0.0) -> Dict[str, Any]:
    """Run until ``pushes`` pushes; returns the model, per-closure losses/staleness and a report
    (``num_workers``: the cluster's workers, needed by Downpour). With ``log`` and
    ``progress_every`` > 0 the server's push and update counters are logged every that many
    seconds while the closures run (the losses are only fetched at the end)."""
    if pushes < 1:
        raise ValueError(f"pushes must be >= 1, got {pushes}")
    if synchronous and pushes % k:
        raise ValueError(f"synchronous rounds of k={k} pushes need pushes divisible by k, got {pushes}")
    downpour = downpour_requested(n_push, n_fetch, clip_norm)
    if downpour and (synchronous or refresh_every):
        raise ValueError("Downpour (n_push, n_fetch, clip_norm) is asynchronous with its own "
                         "fetch period: it excludes synchronous rounds and refresh_every")
    if downpour and num_workers < 1:
        raise ValueError("Downpour needs num_workers, the cluster's number of workers")
    if progress_every < 0:
        raise ValueError(f"progress_every must be >= 0, got {progress_every}")
    with strategy.scope():
        model = build_model()
        stale = build_model() if refresh_every else None
        accumulator = GlobalAccumulator(
            model.trainable_variables, make_optimizer(), k=k,
            snapshot=stale.trainable_variables if stale is not None else None,
            refresh_every=refresh_every, max_pushes=pushes if downpour else 0)
        workers = DownpourWorkers(model.trainable_variables, num_workers, build_model,
                                  n_push=n_push, n_fetch=n_fetch,
                                  clip_norm=clip_norm) if downpour else None
    compute_model = stale if stale is not None else model
    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
    if workers is not None:
        with _progress(accumulator, pushes, log, progress_every):
            return _train_downpour(strategy, coordinator, iterator, model, accumulator, workers,
                                   loss_fn, pushes, k)

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
    with _progress(accumulator, pushes, log, progress_every):
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


def _train_downpour(strategy, coordinator, iterator, model: keras.Model, accumulator: GlobalAccumulator,
                    workers: DownpourWorkers, loss_fn: Callable[[keras.Model, Any], tf.Tensor],
                    pushes: int, k: int) -> Dict[str, Any]:
    """Schedule Downpour worker steps until the server has counted ``pushes`` pushes (closures
    are scheduled in rounds of the steps still needed; pushes past the target are dropped)."""

    @tf.function
    def worker_step(it):
        def replica(batch):
            out = workers.step(batch, model, accumulator.version, loss_fn)
            pushed = accumulator.push(out["gradients"], out["window_version"], enabled=out["push"])
            return (out["loss"], out["grad_norm"], pushed["pushed"], pushed["staleness"],
                    pushed["applied"])

        return strategy.run(replica, args=(next(it),))

    start = time.perf_counter()
    results: List[Any] = []
    while True:
        missing = pushes - int(accumulator.pushes.numpy())
        if missing <= 0:
            break
        results += [coordinator.schedule(worker_step, args=(iterator,))
                    for _ in range(missing * workers.n_push)]
        coordinator.join()
    seconds = time.perf_counter() - start
    fetched = [r.fetch() for r in results]
    report = accumulator.staleness_report()
    norms = [float(n) for _, n, _, _, _ in fetched]
    report.update(seconds=seconds, k=k, refresh_every=0, synchronous=False,
                  n_push=workers.n_push, n_fetch=workers.n_fetch, clip_norm=workers.clip_norm,
                  worker_steps=len(fetched), losses=[float(loss) for loss, *_ in fetched],
                  staleness=[int(s) for _, _, p, s, _ in fetched if p],
                  applied=[bool(a) for _, _, p, _, a in fetched if p],
                  grad_norm_mean=sum(norms) / len(norms),
                  clipped_fraction=(sum(n > workers.clip_norm for n in norms) / len(norms)
                                    if workers.clip_norm else 0.0))
    return {"model": model, "accumulator": accumulator, "report": report}


@contextmanager
def _progress(accumulator: GlobalAccumulator, pushes: int, log: Optional[Callable[[str], None]],
              every: float) -> Iterator[None]:
    """While the body runs, log the server's counters every ``every`` seconds from a daemon
    thread (the coordinator's closures are scheduled up front, so the main thread is blocked
    in ``join`` for the whole run)."""
    if log is None or every <= 0:
        yield
        return
    stop = threading.Event()
    start = time.perf_counter()

    def report() -> None:
        while not stop.wait(every):
            done, updates = int(accumulator.pushes.numpy()), int(accumulator.version.numpy())
            elapsed = time.perf_counter() - start
            rate = elapsed / done if done else float("nan")
            eta = f", about {rate * (pushes - done):.0f} s left" if done else ""
            log(f"progress: {done}/{pushes} pushes, {updates} updates, {elapsed:.0f} s, "
                f"{rate:.3f} s/push{eta}")

    thread = threading.Thread(target=report, name="async-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
