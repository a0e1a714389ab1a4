"""Server-side global gradient accumulation for asynchronous (Downpour-style) SGD.

Built under a ``tf.distribute.ParameterServerStrategy`` scope, every variable here lives on a
parameter server; workers *push* gradients with :meth:`GlobalAccumulator.push` from inside
``strategy.run``. The server adds each pushed gradient to an accumulator and applies one
optimizer update with the **summed** gradient after every ``k`` pushes (``k = 1`` is plain
asynchronous SGD). A ``tf.CriticalSection`` placed on the server serialises the pushes, so
"one update per k pushes" holds exactly even when workers push concurrently.

Staleness of a push = number of updates applied between the worker's pull (the parameter
version it read before computing its gradient) and its push. It is recorded in a histogram.

Artificial staleness (``refresh_every = U``): gradients are computed on a snapshot of the
parameters that the server refreshes only after every U-th update, i.e. all workers "pull
every U updates" (with ``k`` = number of workers and synchronous rounds this is synchronous
SGD with controlled staleness, the ablation of the thesis).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from tf_nmt.compat import keras, tf

MAX_TRACKED_STALENESS = 64  # the histogram's last bucket counts everything >= 63


class GlobalAccumulator:
    """Accumulates pushed gradients on the server; one update of ``variables`` per ``k`` pushes."""

    def __init__(self, variables: Sequence[tf.Variable], optimizer: keras.optimizers.Optimizer,
                 k: int = 1, snapshot: Optional[Sequence[tf.Variable]] = None,
                 refresh_every: int = 0, max_pushes: int = 0) -> None:
        if k < 1:
            raise ValueError(f"k (pushes per update) must be >= 1, got {k}")
        if max_pushes < 0:
            raise ValueError(f"max_pushes must be >= 0 (0: no limit), got {max_pushes}")
        if (snapshot is None) != (refresh_every == 0) or refresh_every < 0:
            raise ValueError("artificial staleness needs both snapshot variables and refresh_every >= 1")
        self.variables: List[tf.Variable] = list(variables)
        self.snapshot = None if snapshot is None else list(snapshot)
        if self.snapshot is not None and [v.shape for v in self.snapshot] != [v.shape for v in self.variables]:
            raise ValueError("snapshot variables must match the trained variables one to one")
        self.optimizer, self.k, self.refresh_every = optimizer, int(k), int(refresh_every)
        self.max_pushes = int(max_pushes)
        optimizer.build(self.variables)  # slots next to the variables (on the servers)
        with tf.device(self.variables[0].device):
            self.sums = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False,
                                     name=f"accum_{i}") for i, v in enumerate(self.variables)]
            self.pushes = tf.Variable(0, dtype=tf.int64, trainable=False, name="pushes")
            self.version = tf.Variable(0, dtype=tf.int64, trainable=False, name="version")
            self.snapshot_version = tf.Variable(0, dtype=tf.int64, trainable=False,
                                                name="snapshot_version")
            self.histogram = tf.Variable(tf.zeros([MAX_TRACKED_STALENESS], tf.int64),
                                         trainable=False, name="staleness_histogram")
            self._lock = tf.CriticalSection(name="global_accumulator")
        if self.snapshot is not None:
            for c, v in zip(self.snapshot, self.variables):
                c.assign(v)

    # --- worker side -------------------------------------------------------------------------
    def compute_variables(self) -> List[tf.Variable]:
        """The variables a worker computes its gradient on: the live ones, or the snapshot."""
        return self.variables if self.snapshot is None else self.snapshot

    def pull_version(self) -> tf.Tensor:
        """The version of the parameters a worker is about to read (call before the forward pass).

        With live parameters an update landing during the forward pass is not seen here, so the
        measured staleness can be low by the updates applied within one forward pass.
        """
        if self.snapshot is None:
            return self.version.read_value()
        return self.snapshot_version.read_value()

    def push(self, gradients: Sequence[tf.Tensor], pulled_version: tf.Tensor,
             enabled: Optional[tf.Tensor] = None) -> Dict[str, tf.Tensor]:
        """Add ``gradients`` (one per variable); every k-th push applies the summed gradient.

        ``enabled`` (a bool tensor) lets a worker call this on every step and push on some;
        a push beyond ``max_pushes`` is dropped, so scheduling a few steps too many cannot
        apply an update too many. Returns ``pushed`` (bool: this call was counted),
        ``applied`` (bool), ``staleness`` (updates since the pull) and ``version``.
        """
        gradients = [tf.convert_to_tensor(g) for g in gradients]
        if len(gradients) != len(self.variables):
            raise ValueError(f"pushed {len(gradients)} gradients for {len(self.variables)} variables")

        def critical():
            take = tf.constant(True) if enabled is None else tf.convert_to_tensor(enabled)
            if self.max_pushes:
                take = tf.logical_and(take, self.pushes.read_value() < self.max_pushes)
            staleness = self.version.read_value() - tf.cast(pulled_version, tf.int64)
            out = tf.cond(take, lambda: counted(staleness),
                          lambda: {"applied": tf.constant(False),
                                   "version": self.version.read_value()})
            return {"pushed": take, "staleness": staleness, **out}

        def counted(staleness):
            bucket = tf.minimum(staleness, MAX_TRACKED_STALENESS - 1)
            ops = [self.histogram.scatter_add(tf.IndexedSlices(tf.ones([1], tf.int64),
                                                               tf.reshape(bucket, [1])))]
            ops += [s.assign_add(tf.cast(g, s.dtype)) for s, g in zip(self.sums, gradients)]
            with tf.control_dependencies(ops):
                count = self.pushes.assign_add(1)
            applied = tf.equal(count % self.k, 0)

            def apply():
                # The optimizer's per-variable rule, called directly: apply_gradients would
                # aggregate across replicas (a merge_call, not allowed inside this control flow);
                # here one pusher applies the server's sum, so there is nothing to aggregate.
                # (apply_gradients would also refresh a schedule's current learning rate at
                # the optimizer's step count; do that here before the update rule reads it.)
                self.optimizer._compute_current_learning_rate()  # pylint: disable=protected-access
                updates = [self.optimizer.update_step(s.read_value(), v)
                           for s, v in zip(self.sums, self.variables)]
                with tf.control_dependencies([u for u in updates if u is not None]):
                    step = self.optimizer.iterations.assign_add(1)
                with tf.control_dependencies([step]):
                    resets = [s.assign(tf.zeros_like(s)) for s in self.sums]
                with tf.control_dependencies(resets):
                    version = self.version.assign_add(1)
                if self.snapshot is not None:
                    def refresh():
                        ops = [c.assign(v.read_value()) for c, v in zip(self.snapshot, self.variables)]
                        with tf.control_dependencies(ops):
                            return self.snapshot_version.assign(version)
                    refreshed = tf.cond(tf.equal(version % self.refresh_every, 0), refresh,
                                        lambda: self.snapshot_version.read_value())
                    with tf.control_dependencies([refreshed]):
                        version = tf.identity(version)
                return version

            version = tf.cond(applied, apply, lambda: self.version.read_value())
            return {"applied": applied, "version": version}

        return self._lock.execute(critical)

    # --- reporting ---------------------------------------------------------------------------
    def staleness_report(self) -> Dict[str, object]:
        """Histogram (bucket s = pushes with staleness s; the last bucket is ">="), mean, max."""
        hist = [int(x) for x in self.histogram.numpy()]
        total = sum(hist)
        mean = sum(i * n for i, n in enumerate(hist)) / total if total else 0.0
        top = max((i for i, n in enumerate(hist) if n), default=0)
        return {"pushes": int(self.pushes.numpy()), "updates": int(self.version.numpy()),
                "histogram": hist[:top + 1], "mean": mean, "max": top,
                "max_is_lower_bound": top == MAX_TRACKED_STALENESS - 1}
