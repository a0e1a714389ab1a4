"""Downpour SGD's worker side (Dean et al., 2012), as Alibaba's distributed NMT system ran it: a
worker fetches the parameters every ``n_fetch`` of its own steps, computes every gradient on the
copy it fetched last, optionally clips it by global norm, accumulates ``n_push`` of them locally
and pushes their mean to the server (:class:`~tf_nmt.distributed.global_accumulator.GlobalAccumulator`).

State that belongs to one worker (its step count, its gradient sum, the version it fetched) is held
in TensorFlow per-worker variables, which live on the worker. The fetched parameter copy is held
on the parameter server, one copy per worker, selected by the worker's id: gradients cannot be taken
through per-worker variables. The arithmetic is Downpour's; the copy's reads travel to the server.

Workers claim ids 0..N-1 on their first step (a counter on the server). Per-worker variables do
not get automatic control dependencies, so every read and write of them is ordered explicitly.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence

from tf_nmt.compat import keras, tf


def requested(n_push: int, n_fetch: int, clip_norm: float) -> bool:
    """Whether these settings ask for Downpour's worker steps (anything but plain async)."""
    return n_push > 1 or n_fetch > 1 or clip_norm > 0


def per_worker(initial: tf.Tensor, name: str) -> tf.Variable:
    """A variable with one independent copy on every worker (create under the strategy scope)."""
    return tf.Variable(initial, trainable=False, name=name, per_worker_variable=True)


class DownpourWorkers:
    """Per-worker Downpour state for ``num_workers`` workers of a ParameterServerStrategy.

    Args:
        variables: the server's trainable variables (the model the accumulator updates).
        num_workers: the cluster's workers (one fetched copy each when ``n_fetch`` > 1).
        build_model: builds another model like the trained one (for the fetched copies).
        n_push: gradients a worker accumulates before it pushes their mean.
        n_fetch: a worker's steps between two fetches of the parameters.
        clip_norm: clip each gradient to this global norm before accumulating (0: off).

    Example:
        with strategy.scope():
            model = build_model()
            workers = DownpourWorkers(model.trainable_variables, 2, build_model, n_push=4)
    """

    def __init__(self, variables: Sequence[tf.Variable], num_workers: int,
                 build_model: Callable[[], keras.Model], n_push: int = 1, n_fetch: int = 1,
                 clip_norm: float = 0.0) -> None:
        if n_push < 1 or n_fetch < 1:
            raise ValueError(f"n_push and n_fetch must be >= 1, got {n_push} and {n_fetch}")
        if clip_norm < 0:
            raise ValueError(f"clip_norm must be >= 0 (0: no clipping), got {clip_norm}")
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        self.variables = list(variables)
        self.n_push, self.n_fetch, self.clip_norm = int(n_push), int(n_fetch), float(clip_norm)
        self.next_id = tf.Variable(0, dtype=tf.int64, trainable=False, name="downpour_next_id")
        self.worker_id = per_worker(tf.constant(-1, tf.int64), "downpour_worker_id")
        self.steps = per_worker(tf.constant(0, tf.int64), "downpour_steps")
        self.fetched_version = per_worker(tf.constant(0, tf.int64), "downpour_fetched_version")
        self.window_version = per_worker(tf.constant(0, tf.int64), "downpour_window_version")
        self.sums = [per_worker(tf.zeros(v.shape, v.dtype), f"downpour_sum_{i}")
                     for i, v in enumerate(self.variables)]
        self.copies: List[keras.Model] = []
        if self.n_fetch > 1:
            self.copies = [build_model() for _ in range(num_workers)]
            for copy in self.copies:
                if [v.shape for v in copy.trainable_variables] != [v.shape for v in self.variables]:
                    raise ValueError("build_model must build the trained model's variables")
                for c, v in zip(copy.trainable_variables, self.variables):
                    c.assign(v)

    def step(self, batch: Any, live_model: keras.Model, version: tf.Variable,
             loss_fn: Callable[[keras.Model, Any], tf.Tensor]) -> Dict[str, tf.Tensor]:
        """One worker step (call inside ``strategy.run``): fetch if due, gradient on the fetched
        parameters, clip, accumulate. Returns the loss, the gradient norm before clipping, the
        mean gradient to push, whether to push it now and the version its window began from."""
        old_id = self.worker_id.read_value()
        unassigned = tf.cast(old_id < 0, tf.int64)
        claimed = self.next_id.assign_add(unassigned)
        worker = tf.where(unassigned > 0, claimed - 1, old_id)
        with tf.control_dependencies([old_id]):
            set_id = self.worker_id.assign(worker)
        step = self.steps.read_value()
        fetch_now = tf.equal(step % self.n_fetch, 0)
        window_start = tf.equal(step % self.n_push, 0)
        push_now = tf.equal((step + 1) % self.n_push, 0)

        if self.copies:
            def branch(copy):
                def run():
                    fetched = tf.cond(fetch_now, lambda: self._fetch(copy, version),
                                      lambda: tf.constant(-1, tf.int64))
                    with tf.control_dependencies([fetched]):
                        with tf.GradientTape() as tape:
                            loss = loss_fn(copy, batch)
                    grads = tape.gradient(loss, copy.trainable_variables)
                    return [loss, fetched] + list(grads)
                return run
            out = tf.switch_case(tf.cast(worker, tf.int32), [branch(c) for c in self.copies])
            loss, fetched, grads = out[0], out[1], out[2:]
        else:
            fetched = version.read_value()  # n_fetch = 1: every step reads the live parameters
            with tf.control_dependencies([fetched]):
                with tf.GradientTape() as tape:
                    loss = loss_fn(live_model, batch)
            grads = tape.gradient(loss, live_model.trainable_variables)
        grads = [tf.convert_to_tensor(g) for g in grads]
        norm = tf.linalg.global_norm(grads)
        if self.clip_norm:
            grads, _ = tf.clip_by_global_norm(grads, self.clip_norm, use_norm=norm)

        old_fetched = self.fetched_version.read_value()
        fetched_version = tf.where(fetch_now, fetched, old_fetched)
        old_window = self.window_version.read_value()
        window_version = tf.where(window_start, fetched_version, old_window)
        keep = 1.0 - tf.cast(window_start, tf.float32)
        old_sums = [s.read_value() for s in self.sums]
        new_sums = [o * tf.cast(keep, o.dtype) + tf.cast(g, o.dtype) for o, g in zip(old_sums, grads)]
        with tf.control_dependencies([set_id, old_fetched, old_window, step, *old_sums]):
            writes = [self.fetched_version.assign(fetched_version),
                      self.window_version.assign(window_version),
                      *[s.assign(n) for s, n in zip(self.sums, new_sums)]]
        with tf.control_dependencies(writes):
            advanced = self.steps.assign_add(1)
        with tf.control_dependencies([advanced]):
            mean = [tf.identity(n / self.n_push) for n in new_sums]
        return {"loss": loss, "grad_norm": norm, "gradients": mean, "push": push_now,
                "window_version": window_version}

    def _fetch(self, copy: keras.Model, version: tf.Variable) -> tf.Tensor:
        """Copy the server's parameters into ``copy``; the version read before the copy."""
        pulled = version.read_value()
        with tf.control_dependencies([pulled]):
            ops = [c.assign(v.read_value()) for c, v in zip(copy.trainable_variables, self.variables)]
        with tf.control_dependencies(ops):
            return tf.identity(pulled)

