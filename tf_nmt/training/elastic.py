"""Elastic training on Horovod's elastic API: ``tf-nmt train --elastic`` launched by
``horovodrun --min-np A --max-np B --host-discovery-script S``.

Why: on a shared cluster a lost worker should cost a few steps, not the whole job. Each attempt is
one :func:`tf_nmt.training.trainer.train` call built for the current world (learning rate and
warm-up from :func:`tf_nmt.training.schedules.from_config` for its size, gradient exchange from
:func:`tf_nmt.distributed.comm.wrap_optimizer` for its size and rank, its data shard, chief-only
writers). Between attempts the run's state lives in a Horovod ``KerasState`` (on Keras 3 ours,
:class:`horovod_patches.keras3.elastic.KerasState`, on Horovod's ``ObjectState``):

* it is committed every ``train.elastic_commit_every`` steps and at every cycle end
  (Horovod's ``CommitStateCallback``): weights, optimizer slots and ``iterations``; the step is
  also the data position (an own corpus's rank starts its stream after its batch of that step,
  kept in memory by :class:`~tf_nmt.training.data_position.DataPositions`, without reading the
  batches before it; the built-in corpus skips them), so Horovod's batch/epoch counters are not
  needed; with ``graddrop`` this process's residuals;
* when a worker dies, ``hvd.elastic.run`` turns the failed collective into a reset: every survivor
  restores its last commit, Horovod re-forms the ring with the workers left and the attempt
  restarts from the committed step;
* a returning or new worker receives the committed state by broadcast from rank 0 — all of it but
  the GradDrop residuals, which belong to the process that accumulated them (a new one starts
  with none, as at the start of a run);
* every change of the world size is logged with the learning rate and warm-up of the new world,
  and the chief appends each attempt to ``RUN_DIR/elastic.jsonl`` (machine-readable);
* at the start of every attempt (after the sync: so after every recovery) and at the end, every
  rank appends a sha256 fingerprint of its shared state (weights and optimizer variables, the
  residuals excepted) with the step and the attempt number to ``RUN_DIR/elastic_fingerprints/``
  (:mod:`horovod_patches.fingerprint`, one file per process), so a study can check that the
  ranks agree after each recovery (``experiments/chaos``).

Settings whose state is not part of the commit are refused (:func:`check_elastic_config`).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Set

from horovod_patches import fingerprint as fingerprints
from tf_nmt import distributed, modes
from tf_nmt.compat import KERAS3, keras, tf
from tf_nmt.config import Config, ConfigError
from tf_nmt.distributed.comm.graddrop import GATHER_PREFIX
from tf_nmt.distributed.comm.optimizer import residual_variables
from tf_nmt.data.tokenizer import TokenizerPair
from tf_nmt.errors import UsageError
from tf_nmt.training import schedules
from tf_nmt.training.data_position import DataPositions
from tf_nmt.training.optimizers import create_slots
from tf_nmt.training.trainer import (TrainResult, build_and_compile, load_tokenizer_for_training,
                                     train, validate_config)

ELASTIC_LOG = "elastic.jsonl"  # one JSON object per attempt, in the run directory (chief only)
# every rank's state fingerprint after each sync and at the end: one file per process
FINGERPRINT_DIR = "elastic_fingerprints"
ELASTIC_MODES = modes.ELASTIC_MODES  # the comm modes whose state an elastic commit holds


def check_elastic_config(cfg: Config) -> None:
    """ConfigError naming every setting ``--elastic`` cannot honour (state outside the commit)."""
    t = cfg.train
    problems = []
    if t.comm not in ELASTIC_MODES:
        problems.append(f"train.comm={t.comm} (its periodic-average state is not committed; "
                        f"use one of {', '.join(ELASTIC_MODES)})")
    if t.comm == "graddrop" and t.local_gradients:
        problems.append("train.local_gradients=true (ranks drift apart between averages, so a "
                        "rollback could keep only rank 0's model)")
    if t.backward_passes_per_step != 1:
        problems.append("train.backward_passes_per_step > 1 (Horovod's local gradient "
                        "accumulators are not committed)")
    if t.quantize_bits:
        problems.append("train.quantize_bits (the re-training residuals and scales are not "
                        "committed)")
    if t.time_budget_minutes:
        problems.append("train.time_budget_minutes (the budget would restart at every reset)")
    if t.ema_decay:  # however it was set: a preset, a file, --set or code
        problems.append(f"train.ema_decay={t.ema_decay} (the weight EMA is not committed, so a "
                        "rollback would not roll it back)")
    if t.elastic_commit_every < 1:
        problems.append(f"train.elastic_commit_every={t.elastic_commit_every} (must be >= 1)")
    if t.elastic_max_retries < 1:
        problems.append(f"train.elastic_max_retries={t.elastic_max_retries} (must be >= 1)")
    if problems:
        raise ConfigError("--elastic cannot honour " + "; ".join(problems))


def create_optimizer_weights(model: keras.Model) -> None:
    """Create the optimizer's ``iterations``, hyper-parameters and slots now (tf_keras legacy
    optimizers create them at the first step; Keras 3 builds them), so that state can be copied
    and broadcast."""
    create_slots(model.optimizer, model.trainable_variables)


def optimizer_variables(model: keras.Model) -> List[Any]:
    """The optimizer's variables in an order every process agrees on: ``iterations``, then each
    slot (by name) of each trainable variable. ``optimizer.variables()`` is in creation order,
    which differs between a model whose slots were restored from a checkpoint and one whose
    slots were created fresh, so it cannot pair values across models or processes."""
    opt = model.optimizer
    if KERAS3:  # built once for the model's trainable variables: one order everywhere
        return list(opt.variables)
    ordered = [opt.iterations] + [opt.get_slot(v, name) for name in sorted(opt.get_slot_names())
                                  for v in model.trainable_variables]
    seen = {id(v) for v in ordered}
    return ordered + [v for v in opt.variables() if id(v) not in seen]


def per_rank_variables(model: keras.Model) -> Set[int]:
    """ids of the optimizer variables that belong to this process: GradDrop's residuals (slots
    on Keras 2, optimizer variables on Keras 3)."""
    return {id(v) for v in residual_variables(model.optimizer, model.trainable_variables)}


_STATE_CLASS: Any = None


def state_class(hvd_elastic: Any) -> Any:
    """``ElasticState``: Horovod's ``KerasState`` on Keras 2, ours
    (:mod:`horovod_patches.keras3.elastic`) on Keras 3 (defined on first use: Horovod is
    optional)."""
    global _STATE_CLASS
    if _STATE_CLASS is not None:
        return _STATE_CLASS

    class ElasticState(hvd_elastic.KerasState):
        """Horovod's ``KerasState`` for a model rebuilt at every attempt, whose GradDrop
        residuals stay with their process. Python attributes: ``committed`` (training has
        begun, so the in-memory commit supersedes the checkpoint on disk), ``world_size``
        (of the last commit) and ``attempt`` (the attempts started, rank 0's count after each
        sync, so every rank numbers an attempt alike, a joining worker too)."""

        failed_at: Optional[int] = None  # the step a failed attempt had reached (this process)

        def shared_variables(self) -> List[Any]:
            own = per_rank_variables(self.model)
            return list(self.model.variables) + [v for v in optimizer_variables(self.model)
                                                 if id(v) not in own]

        def _save_model(self) -> None:
            self._saved_model_state = [tf.identity(v) for v in self.model.variables]
            self._saved_optimizer_state = [tf.identity(v) for v in optimizer_variables(self.model)]

        def _load_model(self) -> None:
            pairs = (list(zip(self.model.variables, self._saved_model_state))
                     + list(zip(optimizer_variables(self.model), self._saved_optimizer_state)))
            for var, value in pairs:
                var.assign(value)

        def sync(self) -> None:
            """Rank 0's committed state to every worker, residuals excepted."""
            from horovod.common.elastic import ObjectState  # noqa: PLC0415

            broadcast_variables(self.shared_variables())
            self._save_model()
            ObjectState.sync(self)  # the Python attributes

        def restore(self) -> None:
            """Back to the last commit (after a failed collective); remembers the step lost."""
            self.failed_at = int(self.optimizer.iterations.numpy())
            super().restore()

        def adopt(self, model: keras.Model) -> None:
            """Move the state into ``model``, freshly built for the new world: the committed
            values, or (before training has begun) rank 0's values; then commit."""
            if (len(model.variables) != len(self._saved_model_state)
                    or len(optimizer_variables(model)) != len(self._saved_optimizer_state)):
                raise RuntimeError("elastic: the rebuilt model's variables do not match the "
                                   "committed state")
            self.model, self.optimizer = model, model.optimizer
            if self.committed:
                self._load_model()
            else:
                broadcast_variables(self.shared_variables())
                self.committed = True
            self.save()

        def fingerprint(self) -> str:
            """sha256 of :meth:`shared_variables` (what a sync makes equal on every rank)."""
            return fingerprints.state_fingerprint(self.shared_variables())

    def broadcast_variables(variables: List[Any]) -> None:
        if KERAS3:
            hvd_elastic.broadcast_variables(variables, root_rank=0)
        else:
            from horovod.tensorflow import broadcast_variables as hvd_broadcast  # noqa: PLC0415

            hvd_broadcast(variables, root_rank=0)

    _STATE_CLASS = ElasticState
    return ElasticState


class ElasticTraining:
    """The :class:`tf_nmt.training.trainer.TrainHooks` of an elastic run: a fresh context per
    attempt, the committed state moved into each attempt's model, and the commit callback."""

    def __init__(self, cfg: Config, run_dir: Path, state: Any, hvd: Any, hvd_elastic: Any,
                 log: Callable[[str], None] = print) -> None:
        self.cfg, self.run_dir, self.state, self.hvd = cfg, Path(run_dir), state, hvd
        self.hvd_elastic, self.log = hvd_elastic, log
        self.attempts = 0
        self.limit = RollbackLimit(cfg.train.elastic_max_retries)
        # each rank's stream positions of the steps since the last commit, across attempts
        self.data_positions = DataPositions(history=cfg.train.elastic_commit_every + 2)

    def context(self) -> distributed.DistContext:
        hvd = self.hvd
        return distributed.DistContext(rank=hvd.rank(), size=hvd.size(),
                                       local_rank=hvd.local_rank(), local_size=hvd.local_size(),
                                       hvd=hvd)

    def attach(self, model: keras.Model, ctx: distributed.DistContext,
               log: Callable[[str], None]) -> List[keras.callbacks.Callback]:
        create_optimizer_weights(model)
        state, t = self.state, self.cfg.train
        before = int(state.world_size)
        failed_at, state.failed_at = state.failed_at, None
        state.world_size = ctx.size
        state.attempt = int(state.attempt) + 1
        state.adopt(model)
        self.attempts = state.attempt
        step = int(model.optimizer.iterations.numpy())
        self.record_fingerprint("sync", ctx)
        self.limit.started(step)
        peak, warmup = schedules.worker_scaled(t, ctx.size)
        lost = failed_at - step if failed_at is not None else 0
        if before != ctx.size:
            old_peak, old_warmup = schedules.worker_scaled(t, before)
            log(f"elastic: world size {before} -> {ctx.size}: peak LR {old_peak:.3g} -> "
                f"{peak:.3g}, warm-up {old_warmup} -> {warmup} steps (worker scaling)")
        log(f"elastic: attempt {self.attempts} with {ctx.size} workers from committed step {step}"
            + (f" (rolled back from step {failed_at}: {lost} steps lost)"
               if failed_at is not None else ""))
        if ctx.is_chief:
            self._record({"attempt": self.attempts, "time": time.time(), "world_size": ctx.size,
                          "previous_world_size": before, "step": step, "failed_at": failed_at,
                          "steps_lost": lost, "peak_lr": peak, "warmup_steps": warmup,
                          "commit_every": t.elastic_commit_every})
        return [self.hvd_elastic.CommitStateCallback(state, batches_per_commit=t.elastic_commit_every)]

    def record_fingerprint(self, event: str, ctx: distributed.DistContext) -> None:
        """Append this rank's state fingerprint and step to ``RUN_DIR/elastic_fingerprints``
        (``event``: "sync" at the start of an attempt, "end" after the last one)."""
        fingerprints.record(self.run_dir / FINGERPRINT_DIR, event,
                            int(self.state.model.optimizer.iterations.numpy()), ctx.rank, ctx.size,
                            self.state.fingerprint(), attempt=int(self.state.attempt))

    def _record(self, entry: Dict[str, Any]) -> None:
        path = self.run_dir / ELASTIC_LOG
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def read_elastic_log(run_dir: Path) -> List[Dict[str, Any]]:
    """The attempts recorded in ``run_dir/elastic.jsonl`` (a torn last line is skipped)."""
    path = Path(run_dir) / ELASTIC_LOG
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else []:
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return entries


# Text that marks an op error as a broken collective rather than a fault of the step itself:
# Horovod's ops and its shut-down message, this package's named collectives, Gloo's transport.
COLLECTIVE_MARKERS = ("Horovod", GATHER_PREFIX, "gloo", "Connection reset by peer",
                      "Connection closed by peer")

# The op error types a lost worker surfaces as. Horovod's TensorFlow ops turn its C++ status into
# a plain TensorFlow error: a collective broken by a lost peer (Gloo's exceptions, Horovod's
# "has been shut down") is an UnknownError, a shut-down mid-op may be Aborted, TensorFlow's own
# transport says Unavailable or DeadlineExceeded. A disagreement between ranks (mismatched shapes,
# dtypes or op names: Horovod's PRECONDITION_ERROR / INVALID_ARGUMENT) arrives as
# FailedPrecondition or InvalidArgument and would repeat after every rollback, so it is never one.
WORKER_LOSS_OP_ERRORS = (tf.errors.UnknownError, tf.errors.AbortedError,
                         tf.errors.UnavailableError, tf.errors.DeadlineExceededError)

WORKER_LOST = "worker lost"      # roll back to the last commit and go on (bounded)
HOSTS_UPDATED = "hosts updated"  # Horovod's own reset for a changed host set, no rollback
FATAL = "fatal"                  # end the job with the error


def error_summary(text: str, limit: int = 400) -> str:
    """An op error's message on one line: its own lines, without TensorFlow's indented
    "defined at" call stack, at most ``limit`` characters."""
    lines = [line.strip() for line in (text or "").splitlines()
             if line.strip() and not line[:1].isspace()]
    return " ".join(lines)[:limit]


def is_collective_failure(error: BaseException) -> bool:
    """Whether an op error's text names a Horovod collective or its transport."""
    message = str(getattr(error, "message", "") or error)
    return any(marker in message for marker in COLLECTIVE_MARKERS)


def failure_kind(error: BaseException) -> str:
    """:data:`WORKER_LOST`, :data:`HOSTS_UPDATED` or :data:`FATAL` for an attempt's error.

    By type where Horovod raises its own (``HorovodInternalError`` from its Python-side
    collectives and state sync, ``HostsUpdatedInterrupt`` from a commit that saw the host set
    change), as ``horovod.common.elastic.run_fn`` does. The text is consulted only for an op
    error of a :data:`WORKER_LOSS_OP_ERRORS` type: inside a graph Horovod's failure reaches Python
    as TensorFlow's generic ``UnknownError`` (no Horovod type crosses the op boundary), which any
    other runtime fault may raise too, so only its text says that a collective broke.
    """
    from horovod.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: PLC0415

    if isinstance(error, HostsUpdatedInterrupt):
        return HOSTS_UPDATED
    if isinstance(error, HorovodInternalError):
        return WORKER_LOST
    if isinstance(error, WORKER_LOSS_OP_ERRORS) and is_collective_failure(error):
        return WORKER_LOST
    return FATAL


class RollbackLimit:
    """Counts rollbacks in a row that resume from the same committed step: a worker lost now and
    then lets training go on between losses (the count starts again), a fault that recurs
    before the next commit does not, and ends the job after ``max_retries`` rollbacks."""

    def __init__(self, max_retries: int) -> None:
        self.max_retries = int(max_retries)
        self.start_step: Optional[int] = None  # the committed step the running attempt began at
        self.failed_from: Optional[int] = None  # ... that the last failed attempt began at
        self.in_a_row = 0

    def started(self, step: int) -> None:
        self.start_step = int(step)

    def failed(self) -> int:
        """Count a failed attempt; returns the failures in a row from the same commit."""
        step, self.start_step = self.start_step, None
        progressed = (step is not None and self.failed_from is not None
                      and step > self.failed_from)
        self.in_a_row = 1 if self.in_a_row == 0 or progressed else self.in_a_row + 1
        if step is not None:
            self.failed_from = step
        return self.in_a_row

    @property
    def exhausted(self) -> bool:
        return self.in_a_row > self.max_retries


def run_attempt(attempt: Callable[[], TrainResult], log: Callable[[str], None],
                limit: Optional[RollbackLimit] = None) -> TrainResult:
    """Run one attempt. A lost worker (see :func:`failure_kind`) becomes
    ``HorovodInternalError`` (roll back and go on) until ``limit`` is exhausted; a changed host
    set goes on to Horovod untouched; any other error, and an exhausted limit, ends the job with
    one ``RuntimeError`` that says why.

    Why: Horovod's own wrapper recognises a failed collective only by its default op names and
    returns None for any other ``UnknownError``; ours are named (graddrop_0, ...) and the error
    may carry only Gloo's text, so the decision is made here, never by Horovod's fallback; and
    Horovod retries a ``HorovodInternalError`` forever.
    """
    from horovod.common.exceptions import HorovodInternalError  # noqa: PLC0415

    try:
        return attempt()
    except Exception as e:  # noqa: BLE001 - classified below, re-raised in every branch
        kind = failure_kind(e)
        if kind == HOSTS_UPDATED:
            raise
        text = e.message if isinstance(e, tf.errors.OpError) else str(e)
        summary = f"{type(e).__name__}: {error_summary(text)}"
        if kind == FATAL:
            if isinstance(e, tf.errors.OpError):
                raise RuntimeError(f"elastic: training failed ({summary})") from e
            raise
        if limit is not None:
            count = limit.failed()
            if limit.exhausted:
                raise RuntimeError(
                    f"elastic: giving up after {count - 1} rollbacks in a row to committed step "
                    f"{limit.failed_from} without getting past it (train.elastic_max_retries="
                    f"{limit.max_retries}); last error: {summary}") from e
            which = f" ({count} of at most {limit.max_retries + 1} tries from this commit)"
        else:
            which = ""
        log(f"elastic: a collective failed ({summary}); rolling back to the last commit{which}")
        if isinstance(e, HorovodInternalError):
            raise
        raise HorovodInternalError(e) from e


def import_elastic() -> Any:
    """The elastic module for this Keras (``KerasState``, ``CommitStateCallback``, ``run``):
    Horovod's tf_keras one on Keras 2, :mod:`horovod_patches.keras3.elastic` on Keras 3."""
    if KERAS3:
        from horovod_patches.keras3 import elastic as keras3_elastic  # noqa: PLC0415 - optional

        return keras3_elastic
    from horovod_patches.keras import import_horovod_keras_elastic  # noqa: PLC0415 - optional

    return import_horovod_keras_elastic()


def train_elastic(cfg: Config, run_dir: Path, log: Callable[[str], None] = print) -> TrainResult:
    """Train the run in ``run_dir`` elastically; must run under an elastic ``horovodrun``."""
    plan = validate_config(cfg, mode="train-elastic")
    check_elastic_config(cfg)
    if os.environ.get("HOROVOD_ELASTIC") != "1":
        raise UsageError("--elastic needs an elastic launch: horovodrun --min-np A --max-np B "
                         "--host-discovery-script SCRIPT ... tf-nmt train --elastic")
    hvd_elastic = import_elastic()
    ctx = distributed.init(enabled=True)
    # The state needs a model before the first attempt (to receive a broadcast when joining a
    # running job); each attempt then builds its own and the state moves into it.
    tokenizer = load_tokenizer_for_training(cfg, ctx, log if ctx.is_chief else (lambda _m: None))
    vocab = TokenizerPair.of(tokenizer)
    model = build_and_compile(cfg, vocab.target.vocab_size, ctx, plan=plan,
                              source_vocab_size=vocab.source_vocab_size)
    create_optimizer_weights(model)
    state = state_class(hvd_elastic)(model, committed=False, world_size=ctx.size, attempt=0)
    hooks = ElasticTraining(cfg, run_dir, state, ctx.hvd, hvd_elastic, log)

    def attempt(_state: Any) -> TrainResult:
        return run_attempt(lambda: train(cfg, Path(run_dir), allow_world_size_change=True,
                                         log=log, hooks=hooks, plan=plan), log, hooks.limit)

    result = hvd_elastic.run(attempt)(state)
    if result is None:
        raise RuntimeError("elastic: the training attempt ended without a result")
    hooks.record_fingerprint("end", hooks.context())
    return result
