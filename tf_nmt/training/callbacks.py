"""Keras callbacks for training runs: progress line (and its JSONL twin), divergence guard,
checkpoints, time budget."""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

from tf_nmt.compat import KERAS3, keras, tf
from tf_nmt.errors import UserError


class DivergenceError(UserError, RuntimeError):
    """Training produced a NaN/Inf loss or the loss exploded; the run stopped."""


def _current_lr(optimizer) -> float:
    """The learning rate of the step just taken (``iterations - 1``)."""
    if KERAS3:  # its ``learning_rate`` is already a value, at ``iterations``: take the schedule
        while hasattr(optimizer, "inner_optimizer"):  # loss scaling around Horovod around Adam
            optimizer = optimizer.inner_optimizer
        lr = optimizer._learning_rate
    else:
        lr = optimizer.learning_rate if hasattr(optimizer, "learning_rate") else optimizer.lr
    if isinstance(lr, keras.optimizers.schedules.LearningRateSchedule):
        lr = lr(optimizer.iterations - 1)
    return float(lr.numpy()) if hasattr(lr, "numpy") else float(lr)


PROGRESS_LOG = "progress.jsonl"  # the machine-readable progress log, in the run directory


def read_progress_log(path: Union[str, Path]) -> List[Dict[str, Any]]:
    """The entries of a JSONL progress log, in file order (``[]`` when there is none).

    A last line cut short by a crash mid-write is skipped; a malformed line elsewhere is an
    error, since the file is written only by :class:`ProgressLogger`.
    """
    path = Path(path)
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    entries = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):  # torn final write
                break
            raise ValueError(f"{path}:{number}: not a JSON progress entry: {line[:80]!r}") from None
    return entries


class ProgressLogger(keras.callbacks.Callback):
    """Prints ``step | loss | lr | tokens/s | s/step`` every ``every`` steps.

    The step reads ``step 1250/5000`` against the step limit ``total_steps``, or, when training
    is time-budgeted (``time_budget_minutes > 0``: the budget ends it, the step limit is only a
    cap), ``step 1250, 12.3/45 min``: this invocation's training time against the budget.

    Tokens are the non-pad target tokens counted by the ``tokens`` metric (reset per epoch), so
    the rate is measured, not estimated from the budget. With ``world_size > 1`` the line shows
    the total rate of all workers and the rate per worker: ``sum_across_ranks`` (called on every
    rank at the same steps, e.g. an allreduce) sums the ranks' token counts; without it the
    local count is scaled by ``world_size``.

    With ``jsonl_path`` every entry is also appended to that file as one JSON object per line
    (``step``, ``total_steps``, ``loss``, ``lr``, ``tokens_per_s``, ``tokens_per_s_per_rank``,
    ``s_per_step``, ``elapsed_s`` since this invocation began training, ``cpu_s``: the CPU time
    the process used since then, all threads, so that Δcpu_s / Δelapsed_s between two entries is
    how many cores training kept busy there, ``time``), flushed at
    once, so studies read numbers instead of parsing the human line. Pass it on the chief only.
    A resumed run continues the file; entries past the step it resumes from (logged after the
    checkpoint it restarts at) are dropped first, so each step appears once.
    """

    def __init__(self, every: int, total_steps: int, log: Callable[[str], None] = print,
                 world_size: int = 1,
                 sum_across_ranks: Optional[Callable[[float], float]] = None,
                 jsonl_path: Optional[Union[str, Path]] = None,
                 time_budget_minutes: float = 0.0) -> None:
        super().__init__()
        self.every, self.total_steps, self.log, self.world_size = every, total_steps, log, world_size
        self.time_budget_minutes = time_budget_minutes
        self.sum_across_ranks = sum_across_ranks
        self.jsonl_path = Path(jsonl_path) if jsonl_path is not None else None
        self.history: List[Dict[str, Any]] = []

    def on_train_begin(self, logs=None):
        self._train_t0, self._train_cpu0 = time.perf_counter(), time.process_time()
        step = self._last_step = int(self.model.optimizer.iterations.numpy())
        if self.jsonl_path is None or not self.jsonl_path.is_file():
            return
        earlier = read_progress_log(self.jsonl_path)
        kept = [e for e in earlier if e.get("step", 0) <= step]
        if len(kept) != len(earlier) or self.jsonl_path.read_bytes()[-1:] not in (b"", b"\n"):
            tmp = self.jsonl_path.with_name(self.jsonl_path.name + ".tmp")
            tmp.write_text("".join(json.dumps(e) + "\n" for e in kept), encoding="utf-8")
            tmp.replace(self.jsonl_path)

    def _append(self, entry: Dict[str, Any]) -> None:
        self.jsonl_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.jsonl_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()

    def on_epoch_begin(self, epoch, logs=None):
        self._t0 = time.perf_counter()
        self._tokens0 = 0.0
        self._step0 = int(self.model.optimizer.iterations.numpy())

    def on_train_batch_end(self, batch, logs=None):
        # A call may run several steps (train.steps_per_execution): log when it crossed a
        # multiple of ``every``.
        step, last = int(self.model.optimizer.iterations.numpy()), self._last_step
        self._last_step = step
        if step // self.every == last // self.every and step != self.total_steps:
            return
        logs = logs or {}
        now = time.perf_counter()
        tokens = float(logs.get("tokens", 0.0))
        elapsed = max(now - self._t0, 1e-9)
        steps = max(step - self._step0, 1)
        local = tokens - self._tokens0
        total = (self.sum_across_ranks(local) if self.sum_across_ranks is not None
                 else local * self.world_size)
        rate = total / elapsed
        entry = {"step": step, "loss": float(logs.get("loss", math.nan)),
                 "lr": _current_lr(self.model.optimizer), "tokens_per_s": rate,
                 "tokens_per_s_per_rank": rate / self.world_size,
                 "s_per_step": elapsed / steps, "time": time.time()}
        self.history.append(entry)
        if self.jsonl_path is not None:
            self._append({"step": step, "total_steps": self.total_steps, **entry,
                          "elapsed_s": now - self._train_t0,
                          "cpu_s": time.process_time() - self._train_cpu0})
        per_rank = f" ({rate / self.world_size:,.0f}/rank)" if self.world_size > 1 else ""
        if self.time_budget_minutes > 0:
            where = (f"step {step:>6}, {(now - self._train_t0) / 60:.1f}/"
                     f"{self.time_budget_minutes:g} min")
        else:
            where = f"step {step:>6}/{self.total_steps}"
        self.log(f"{where} | loss {entry['loss']:.4f} | lr {entry['lr']:.2e} "
                 f"| {rate:,.0f} tgt tok/s{per_rank} | {entry['s_per_step']:.3f} s/step")
        self._t0, self._tokens0, self._step0 = now, tokens, step


class DivergenceGuard(keras.callbacks.Callback):
    """Stops with a clear :class:`DivergenceError` on a NaN/Inf loss or an exploding loss.

    "Exploding" means the running loss of the current cycle exceeds ``factor`` times the best
    cycle loss seen so far (checked after the first cycle, when a baseline exists).
    """

    def __init__(self, factor: float = 4.0) -> None:
        super().__init__()
        self.factor = factor
        self.best: Optional[float] = None
        self.error: Optional[DivergenceError] = None

    def _fail(self, message: str) -> None:
        self.error = DivergenceError(message)
        self.model.stop_training = True

    def on_train_batch_end(self, batch, logs=None):
        loss = float((logs or {}).get("loss", 0.0))
        step = int(self.model.optimizer.iterations.numpy())
        if not math.isfinite(loss):
            self._fail(f"training diverged at step {step}: loss is {loss}. Lower train.peak_lr, "
                       "raise train.warmup_steps or set train.clip_norm; the last good "
                       "checkpoint is kept.")
        elif self.best is not None and self.factor > 0 and loss > self.factor * self.best:
            self._fail(f"training diverged at step {step}: loss {loss:.3f} is more than "
                       f"{self.factor}x the best cycle loss {self.best:.3f}. Lower train.peak_lr "
                       "or set train.clip_norm; the last good checkpoint is kept.")

    def on_epoch_end(self, epoch, logs=None):
        loss = float((logs or {}).get("loss", math.nan))
        if math.isfinite(loss):
            self.best = loss if self.best is None else min(self.best, loss)


class CheckpointSaver(keras.callbacks.Callback):
    """Saves a managed checkpoint (numbered by the optimizer step) at every cycle end and at the
    end of training; a diverged run is not saved over its last good checkpoint."""

    def __init__(self, manager: tf.train.CheckpointManager, guard: Optional[DivergenceGuard] = None,
                 log: Callable[[str], None] = print) -> None:
        super().__init__()
        self.manager, self.guard, self.log = manager, guard, log

    def _save(self) -> None:
        if self.guard is not None and self.guard.error is not None:
            return
        step = int(self.model.optimizer.iterations.numpy())
        if self.manager.latest_checkpoint and self.manager.latest_checkpoint.endswith(f"-{step}"):
            return
        path = self.manager.save(checkpoint_number=step)
        self.log(f"saved checkpoint {path}")

    def on_epoch_end(self, epoch, logs=None):
        self._save()

    def on_train_end(self, logs=None):
        self._save()


class WeightEMA(keras.callbacks.Callback):
    """Folds the weights into their moving average (``train.ema_decay``) after every optimizer
    step: one compiled update (:class:`tf_nmt.models.ema.WeightAverager`) per batch, from the
    weights the step produced (train.steps_per_execution must be 1: checked by the trainer)."""

    def __init__(self, averager: Any) -> None:
        super().__init__()
        self.averager = averager

    def on_train_batch_end(self, batch, logs=None):
        self.averager.update()


class StepLimit(keras.callbacks.Callback):
    """Stops training once the optimizer has taken ``total_steps`` steps.

    ``model.fit`` runs whole cycles of ``steps_per_cycle`` batches; a run resumed from a step
    that is not on the cycle grid (after a time budget stop, or a shorter earlier run), or a
    ``total_steps`` that is not a multiple of the cycle, would otherwise overshoot. The cycle
    that is cut short still gets its validation and its checkpoint.
    """

    def __init__(self, total_steps: int) -> None:
        super().__init__()
        self.total_steps = total_steps

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) >= self.total_steps:
            self.model.stop_training = True


class TimeBudget(keras.callbacks.Callback):
    """Stops training cleanly once ``minutes`` of wall time have passed (0 = no limit).

    With ``clock`` (a timed cool-down's variable, :func:`tf_nmt.training.schedules.cooldown_clock`)
    it also sets ``clock`` to the share of the budget spent, so the learning rate reaches 0 when
    the budget ends. The budget, and so the clock, counts this invocation's time: a resumed run
    starts both afresh.

    Several ranks must stop at the same step (a rank still inside a step would wait for a
    collective its peers never join) and, with a clock, use the same rate: give ``agree``, which
    maps this rank's elapsed seconds to the value all ranks agree on (e.g. the mean over ranks,
    an allreduce), and ``every``: it is called on every rank after every ``every``-th batch of
    this invocation, and the budget and clock follow the agreed time only.
    """

    def __init__(self, minutes: float, log: Callable[[str], None] = print,
                 clock: Optional[tf.Variable] = None,
                 agree: Optional[Callable[[float], float]] = None, every: int = 1) -> None:
        super().__init__()
        if clock is not None and minutes <= 0:
            raise ValueError("a cool-down clock needs a time budget (minutes > 0)")
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.seconds, self.log, self.clock = minutes * 60.0, log, clock
        self.agree, self.every = agree, every
        self.stopped_early = False

    def _now(self) -> float:
        """Seconds on the budget's clock (the wall clock; a test may count steps instead)."""
        return time.perf_counter()

    def on_train_begin(self, logs=None):
        self._start, self._batches = self._now(), 0
        if self.clock is not None:
            self.clock.assign(0.0)

    def on_train_batch_end(self, batch, logs=None):
        self._batches += 1
        if self.seconds <= 0 or self._batches % self.every:
            return
        elapsed = self._now() - self._start
        if self.agree is not None:
            elapsed = self.agree(elapsed)
        if self.clock is not None:  # the rate of the steps to come
            self.clock.assign(min(1.0, elapsed / self.seconds))
        if elapsed > self.seconds:
            if not self.model.stop_training:
                self.log(f"time budget of {self.seconds / 60:.1f} min reached; stopping")
            self.stopped_early = True
            self.model.stop_training = True
