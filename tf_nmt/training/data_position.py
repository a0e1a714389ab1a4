"""Where each rank's own-corpus stream stands, so that a resume starts there instead of reading
the batches before it again (issue 55).

A rank's stream (:func:`tf_nmt.data.streaming.rank_stream`) tags every batch with its
:class:`~tf_nmt.data.streaming.StreamPosition`. :meth:`DataPositions.track` strips the tag as
training takes the batch and keeps it in a variable, so at a step's end the variable holds the
position of that step's batch. At every checkpoint the ranks' positions are gathered into one
JSON string that the checkpoint carries (``data_position``); a resume restores it and every rank
starts its stream right after its own batch of that step: the cost is reading one window,
whatever the step. The elastic driver also keeps each rank's recent positions in memory for
rollbacks to a commit between checkpoints.

Where no position fits (a run written before positions were recorded, another world size whose
shares differ), each rank starts the data epoch it was in over, and the chief says so.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Dict, Optional, Tuple

from tf_nmt.compat import keras, tf
from tf_nmt.data.streaming import StreamPosition

CHECKPOINT_KEY = "data_position"  # the checkpoint's dependency holding the gathered record


class DataPositions:
    """This rank's last consumed stream position, the ranks' record for the checkpoint and
    (``history`` > 0, elastic) this rank's positions of its last ``history`` steps."""

    def __init__(self, history: int = 0) -> None:
        self.current = tf.Variable([0, 0, -1], dtype=tf.int64, trainable=False)
        self.record = tf.Variable("", dtype=tf.string, trainable=False)
        self.history_size = int(history)
        self.history: Dict[int, Tuple[int, int, int, int, int]] = {}  # step -> (size, rank, e, w, i)

    def track(self, stream: tf.data.Dataset, start: StreamPosition) -> tf.data.Dataset:
        """``stream``'s batches without their tag, each tag kept in :attr:`current` as the batch
        is taken (no read-ahead after this step, so it is the batch training consumed)."""
        self.current.assign([start.epoch, start.window, start.batch - 1])

        def take(batch: Any, position: tf.Tensor) -> Any:
            with tf.control_dependencies([self.current.assign(position)]):
                return tf.nest.map_structure(tf.identity, batch)

        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False  # would read ahead of ``take``
        return stream.map(take).with_options(options)

    def gather(self, step: int, ctx: Any) -> None:
        """Every rank's current position into :attr:`record` (a collective: all ranks call it
        at the same steps)."""
        mine = tf.reshape(self.current, [1, 3])
        every = ctx.hvd.allgather(mine, name="data_position") if ctx.distributed else mine
        self.record.assign(json.dumps({"step": int(step), "world_size": ctx.size,
                                       "positions": every.numpy().tolist()}))

    def remember(self, step: int, ctx: Any) -> None:
        """This rank's position after ``step`` (elastic rollbacks), the last ``history`` kept."""
        if self.history_size <= 0:
            return
        epoch, window, index = (int(v) for v in self.current.numpy())
        self.history[int(step)] = (ctx.size, ctx.rank, epoch, window, index)
        for old in sorted(self.history)[:-self.history_size]:
            del self.history[old]

    def restore(self, prefix: Optional[str]) -> None:
        """:attr:`record` from checkpoint ``prefix`` (none there, or no ``prefix``: empty)."""
        value = b""
        if prefix:
            reader = tf.train.load_checkpoint(prefix)
            key = f"{CHECKPOINT_KEY}/.ATTRIBUTES/VARIABLE_VALUE"
            if reader.has_tensor(key):
                value = reader.get_tensor(key)
        self.record.assign(value)

    def start(self, step: int, ctx: Any, log: Callable[[str], None]) -> StreamPosition:
        """Where this rank's stream starts to continue after ``step``: right after its batch of
        ``step`` when recorded (in memory, else the restored record) for this world size, else
        at the start of the data epoch it was in (logged)."""
        if step <= 0:
            return StreamPosition()
        own = self.history.get(int(step))
        if own is not None and own[:2] == (ctx.size, ctx.rank):
            return StreamPosition(own[2], own[3], own[4] + 1)
        raw = self.record.numpy()
        record = json.loads(raw.decode("utf-8")) if raw else {}
        positions = record.get("positions") or []
        if record.get("step") == step and record.get("world_size") == ctx.size:
            epoch, window, index = positions[ctx.rank]
            return StreamPosition(int(epoch), int(window), int(index) + 1)
        epoch = max((int(p[0]) for p in positions), default=0)
        why = (f"it was recorded at step {record.get('step')} with {record.get('world_size')} "
               f"rank(s)" if record else "the checkpoint records none (written before data "
               "positions were)")
        log(f"data: no stream position for step {step} with {ctx.size} rank(s) ({why}): each "
            f"rank starts data epoch {epoch} over")
        return StreamPosition(epoch)


class DataPositionCallback(keras.callbacks.Callback):
    """Gathers the ranks' positions before every checkpoint (cycle end, training end: place it
    before the savers), keeps the elastic history, and has the chief log each new data epoch."""

    def __init__(self, positions: DataPositions, ctx: Any,
                 log: Callable[[str], None] = print) -> None:
        super().__init__()
        self.positions, self.ctx, self.log = positions, ctx, log
        self.epoch: Optional[int] = None

    def _step(self) -> int:
        return int(self.model.optimizer.iterations.numpy())

    def on_train_batch_end(self, batch, logs=None):
        if self.positions.history_size > 0:
            self.positions.remember(self._step(), self.ctx)
        if self.ctx.is_chief:
            epoch = int(self.positions.current[0].numpy())
            if self.epoch is not None and epoch != self.epoch:
                self.log(f"data epoch {epoch} begins at step {self._step()} (rank 0's share read "
                         f"{epoch} time(s))")
            self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        self.positions.gather(self._step(), self.ctx)

    def on_train_end(self, logs=None):
        self.positions.gather(self._step(), self.ctx)
