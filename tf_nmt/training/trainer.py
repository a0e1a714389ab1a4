"""Training a model with Keras ``model.fit``: data, model, schedule, optimizer, callbacks, resume.

Works single-process and under ``horovodrun`` (via :mod:`tf_nmt.distributed`): each worker reads
its own shard, gradients are exchanged as ``train.comm`` says (:mod:`tf_nmt.distributed.comm`;
default ``sparse_as_dense``: Horovod allreduce with embedding gradients densified), the learning
rate and warm-up follow :func:`tf_nmt.training.schedules.from_config` (scaled with the number of
workers), and only rank 0 writes checkpoints, TensorBoard logs, ``progress.jsonl`` and the run
directory.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Protocol

from tf_nmt import distributed
from tf_nmt.compat import ENV_VAR, KERAS3, keras, tf
from tf_nmt.config import Config, ConfigError, TrainConfig
from tf_nmt.config_usage import check_given
from tf_nmt.data.pipeline import check_data_config, encode_corpus, make_dataset
from tf_nmt.data.prepared import PreparedData, read_prepared
from tf_nmt.data.streaming import block_pairs, rank_stream
from tf_nmt.distributed import comm
from tf_nmt.distributed.sync import chief_value
from tf_nmt.data.tokenizer import Tokenizers, TokenizerPair
from tf_nmt.data.data_dir import ensure_vocab, load_split, prepared_vocab, vocab_path
from tf_nmt.data.weighting import load_train_pairs
from tf_nmt import modes
from tf_nmt.models import check_model_config, dropout
from tf_nmt.models.activation_quant import ActivationQuantization, from_train_config
from tf_nmt.models.ema import CHECKPOINT_KEY as EMA_KEY, WeightAverager, checkpoint_has_ema
from tf_nmt.models.kernels import use_kernels
from tf_nmt.models.losses import LabelSmoothedCrossEntropy, MaskedAccuracy, TokenCount
from tf_nmt.quantization import retrain
from tf_nmt.training import callbacks as cb
from tf_nmt.training import transfer
from tf_nmt.training.data_position import (CHECKPOINT_KEY as POSITION_KEY, DataPositionCallback,
                                           DataPositions)
from tf_nmt.training.checkpoints import (make_checkpoint, make_manager, make_rank_manager,
                                         restore_training_state, step_of)
from tf_nmt.training.optimizers import build_optimizer
from tf_nmt.training import precision, runtime, schedules
from tf_nmt.run_dir import (RunDir, build_initialised_model, check_resume, run_meta,
                            save_vocabularies)


@dataclass(frozen=True)
class TrainPlan:
    """What a run's ``cfg.train`` resolves to: worked out once, by :func:`validate_config`, and
    passed down as values, so nothing below it reads or validates those keys again."""

    comm: comm.CommSettings
    activation_quantization: Optional[ActivationQuantization]
    loss_kernel: str
    dropout_kernel: str
    norm_kernel: str
    # why ``auto`` took TensorFlow's op, per kernel ("loss", "dropout", "norm") that fell back
    kernel_fallbacks: Dict[str, str] = field(default_factory=dict)

    @property
    def kernels(self) -> Dict[str, str]:
        """``{"loss": ..., "dropout": ..., "norm": ...}``: the kernels used (``fused`` or ``tf``)."""
        return {"loss": self.loss_kernel, "dropout": self.dropout_kernel, "norm": self.norm_kernel}


@dataclass
class TrainResult:
    """What a finished (or stopped) run reports."""

    final_step: int
    resumed_from: int
    wall_seconds: float
    history: List[Dict[str, Any]] = field(default_factory=list)
    val_loss: List[float] = field(default_factory=list)
    num_parameters: int = 0
    stopped_by_time_budget: bool = False


class TrainHooks(Protocol):
    """What a driver that runs :func:`train` more than once per process plugs in (the elastic
    driver, :mod:`tf_nmt.training.elastic`): the world each attempt runs in, and the state and
    callbacks it adds once the model is built."""

    def context(self) -> distributed.DistContext:
        """This process's place in the current world (replaces ``distributed.init``)."""

    def attach(self, model: keras.Model, ctx: distributed.DistContext,
               log: Callable[[str], None]) -> List[keras.callbacks.Callback]:
        """Called once the model is built, restored and initialised (it may overwrite its
        state); returns callbacks to run after the per-step ones and before checkpointing."""


def build_and_compile(cfg: Config, vocab_size: int, ctx=None,
                      schedule: Optional[keras.optimizers.schedules.LearningRateSchedule] = None,
                      plan: Optional[TrainPlan] = None, policy: Optional[str] = None,
                      source_vocab_size: Optional[int] = None,
                      exchange: bool = True) -> keras.Model:
    """Build the configured model, call it once so variables exist, and compile it (with
    ``schedule``, else the config's, :func:`tf_nmt.training.schedules.from_config`;
    ``source_vocab_size``: separate vocabularies, None: shared).

    ``plan``: the run's :func:`validate_config` (None: validated here). ``policy``: the Keras
    dtype policy, e.g. ``"mixed_bfloat16"`` (None: ``train.mixed_precision`` through
    :func:`tf_nmt.training.precision.policy_for_device`), one value for the model and its optimizer.
    ``exchange=False`` (one process only): the plain optimizer, without the comm mode's work, not
    even a local one (graddrop selects and encodes on one process too) and without accumulation:
    a compute-only step of one pass.
    """
    ctx = ctx or distributed.init(enabled=False)
    t = cfg.train
    plan = validate_config(cfg) if plan is None else plan
    policy = precision.policy_for_device(t.mixed_precision) if policy is None else policy
    model = build_model_for_training(cfg, vocab_size, plan, policy, source_vocab_size)
    optimizer = build_optimizer(t, schedule if schedule is not None
                                else schedules.from_config(t, ctx.size))
    if exchange:
        optimizer = comm.wrap_optimizer(optimizer, plan.comm, ctx,
                                        backward_passes_per_step=t.backward_passes_per_step)
    elif ctx.size > 1:
        raise ValueError("exchange=False builds a compute-only step of one process")
    # Loss scaling (float16 GPUs only) wraps the communication. Keras 2: scaled gradients are
    # averaged, then unscaled and checked for overflow. Keras 3 checks before the inner
    # optimizer runs, so with several ranks the check is global (all ranks skip or none do).
    optimizer = precision.wrap_optimizer(optimizer, policy, distributed=ctx.distributed)
    if t.jit_compile and ctx.size > 1:
        raise ConfigError(f"train.jit_compile needs one process, not {ctx.size}: Horovod's "
                          "collectives have no XLA kernels")
    loss_kernel = plan.loss_kernel
    loss = LabelSmoothedCrossEntropy(t.label_smoothing, kernel=loss_kernel)
    model.compile(optimizer=optimizer, loss=loss,
                  metrics=[TokenCount(name="tokens"),
                           MaskedAccuracy(name="accuracy", kernel=loss_kernel)],
                  jit_compile=t.jit_compile, steps_per_execution=t.steps_per_execution)
    return model


def validate_config(cfg: Config, mode: str = "train") -> TrainPlan:
    """Every ConfigError a run would hit, raised before any data, file or process is touched;
    returns what it resolved (:class:`TrainPlan`), for the run to pass down. ``mode``: the
    :data:`tf_nmt.config_usage.MODES` entry whose unused given keys are refused."""
    check_given(cfg, mode)
    check_model_config(cfg.model.kind, cfg.model.hparams)
    check_data_config(cfg.data)
    t = cfg.train
    schedules.from_config(t)
    settings = comm.resolve_comm(t)
    quant = from_train_config(t)
    check_jit_compile(t)
    check_steps_per_execution(t)
    check_ema(t)
    check_keras_support(t)
    kernels = runtime.resolve_kernels(t)
    return TrainPlan(comm=settings, activation_quantization=quant,
                     loss_kernel=kernels["loss"][0], dropout_kernel=kernels["dropout"][0],
                     norm_kernel=kernels["norm"][0],
                     kernel_fallbacks={name: why for name, (_k, why) in kernels.items() if why})


def check_keras_support(t: TrainConfig) -> None:
    """ConfigError for a comm mode that does not run on Keras 3 yet (``TF_NMT_KERAS=3``;
    :attr:`tf_nmt.modes.CommMode.keras3`; every mode runs on both today, GradDrop too)."""
    if KERAS3 and not modes.COMM[t.comm].keras3:
        others = [m for m in modes.COMM_MODES if modes.COMM[m].keras3]
        raise ConfigError(f"train.comm={t.comm} runs on Keras 2 only ({ENV_VAR}=2 or --keras 2); "
                          f"on Keras 3 use "
                          f"{', '.join(others[:-1])} or {others[-1]}")


def check_jit_compile(t: TrainConfig) -> None:
    """ConfigError for ``train.jit_compile`` with a setting whose ops XLA cannot compile."""
    if not t.jit_compile:
        return
    custom = [name for name, on in (("train.quantize_bits", t.quantize_bits),
                                    ("train.quantize_activations_bits", t.quantize_activations_bits),
                                    (f"train.comm={t.comm}", not modes.COMM[t.comm].supports_jit),
                                    ("train.schedule_implementation=op",
                                     t.schedule_implementation == "op"))
              if on]
    if custom:
        raise ConfigError("train.jit_compile cannot compile the custom ops of "
                          + ", ".join(custom) + " (they have no XLA kernels)")


def check_steps_per_execution(t: TrainConfig) -> None:
    """ConfigError for a ``train.steps_per_execution`` a run could not honour: below 1, not
    dividing the cycle, the log interval or the step count (a call cannot stop part-way), or
    with settings whose callbacks must act after every single step."""
    n = t.steps_per_execution
    if n < 1:
        raise ConfigError(f"train.steps_per_execution must be >= 1, got {n}")
    if n == 1:
        return
    misaligned = [f"train.{key}={value}" for key, value in
                  (("steps_per_cycle", t.steps_per_cycle), ("log_every", t.log_every),
                   ("train_steps", t.train_steps)) if value % n]
    if misaligned:
        raise ConfigError(f"train.steps_per_execution={n} runs {n} steps per call, so it must "
                          f"divide {', '.join(misaligned)}")
    per_step = [name for name, on in
                (("train.quantize_bits (re-quantises after every step)", t.quantize_bits),
                 (f"train.comm={t.comm} (acts between steps)",
                  not modes.COMM[t.comm].acts_within_steps),
                 ("train.backward_passes_per_step > 1 (Horovod's accumulation)",
                  t.backward_passes_per_step > 1)) if on]
    if per_step:
        raise ConfigError(f"train.steps_per_execution={n} cannot be used with "
                          + ", ".join(per_step) + "; set it to 1")


def check_ema(t: TrainConfig) -> None:
    """ConfigError for a ``train.ema_decay`` out of range, under a comm mode whose ranks' weights
    differ between averages (the EMA follows the weights all ranks share; this holds for a value
    set in code too, where :mod:`tf_nmt.config_usage` refuses only keys the user gave), or with
    settings whose optimizer steps the per-step EMA update would not see one by one."""
    if not 0.0 <= t.ema_decay < 1.0:
        raise ConfigError(f"train.ema_decay must be in [0, 1) (0: off), got {t.ema_decay}")
    if t.ema_decay and not modes.COMM[t.comm].supports_ema:
        raise ConfigError(f"train.ema_decay cannot be used with train.comm={t.comm} (the ranks' "
                          f"weights differ between averages); use {' or '.join(modes.HOROVOD_MODES)}")
    off_step = [name for name, on in
                (("train.steps_per_execution > 1 (the update runs once per call)",
                  t.steps_per_execution > 1),
                 ("train.backward_passes_per_step > 1 (the update runs per backward pass)",
                  t.backward_passes_per_step > 1)) if on]
    if t.ema_decay and off_step:
        raise ConfigError("train.ema_decay updates after every optimizer step, so it cannot be "
                          "used with " + ", ".join(off_step) + "; set it to 1")


def check_execution_start(t: TrainConfig, world_size: int, elastic: bool, step: int) -> None:
    """ConfigError where ``train.steps_per_execution`` cannot run this start: several processes
    or elastic training (their callbacks and collectives run per step), or a resume from a step
    off its grid (the run would stop past ``train_steps`` and log off ``log_every``)."""
    n = t.steps_per_execution
    if n == 1:
        return
    if world_size > 1 or elastic:
        raise ConfigError(f"train.steps_per_execution={n} needs one process and no --elastic "
                          f"(world size {world_size}); set it to 1")
    if step % n:
        raise ConfigError(f"the run resumes from step {step}, not a multiple of "
                          f"train.steps_per_execution={n}: resume with a divisor of {step} "
                          "(1 always works)")


def build_model_for_training(cfg: Config, vocab_size: int, plan: Optional[TrainPlan] = None,
                             policy: Optional[str] = None,
                             source_vocab_size: Optional[int] = None) -> keras.Model:
    """The configured model with its variables created, under the dtype ``policy`` (None: the
    configured one, bf16 on CPUs and Ampere+); ``plan`` as in :func:`build_and_compile`."""
    plan = validate_config(cfg) if plan is None else plan
    policy = precision.policy_for_device(cfg.train.mixed_precision) if policy is None else policy
    with use_kernels(**plan.kernels):
        return build_initialised_model(cfg.model.kind, vocab_size, cfg.model.hparams, policy=policy,
                                       activation_quantization=plan.activation_quantization,
                                       source_vocab_size=source_vocab_size)


def load_tokenizer_for_training(cfg: Config, ctx, log: Callable[[str], None],
                                prepared: Optional[PreparedData] = None) -> Tokenizers:
    """The data dir's vocabulary: an own corpus's from its manifest (the shared tokenizer, or
    the :class:`TokenizerPair` of separate ones; ``cfg.data.vocab_size`` set to its (target)
    size; a different size given by the user is refused), the built-in corpus's
    learned once; only a single process may learn it (workers would race)."""
    data_dir = Path(cfg.data.data_dir)
    prepared = read_prepared(data_dir) if prepared is None else prepared
    if prepared.own:
        given = "data.vocab_size" in cfg.given_by_user()  # a preset's value yields to the corpus
        tokenizer = prepared_vocab(prepared, cfg.data.vocab_size if given else None)
        cfg.data.vocab_size = prepared.vocab_size  # what config.yaml records for the run
        return tokenizer
    if ctx.size > 1 and not vocab_path(data_dir, cfg.data.vocab_size).is_file():
        raise FileNotFoundError(
            f"no vocabulary {vocab_path(data_dir, cfg.data.vocab_size)}: learn it once before "
            f"launching several workers, with `tf-nmt prepare-data --data-dir {data_dir} "
            f"--vocab-size {cfg.data.vocab_size} --vocab-only` (your own corpus) or without "
            "--vocab-only (the built-in corpus)")
    return ensure_vocab(data_dir, cfg.data.vocab_size, log=log)


def check_own_corpus(cfg: Config, prepared: PreparedData) -> None:
    """ConfigError for settings an own corpus cannot honour: ``data.oversample`` needs the
    built-in corpus's per-source records, which an own corpus does not have;
    ``train.init_from`` maps one shared vocabulary, not separate ones."""
    if cfg.data.oversample:
        raise ConfigError(f"data.oversample cannot be used with the own corpus in {prepared.root}: "
                          "it records no source per pair (only the built-in corpus does); unset it")
    if cfg.train.init_from and not prepared.shared_vocab:
        raise ConfigError(f"train.init_from cannot initialise a run on {prepared.root}: it has "
                          "separate source/target vocabularies, which transfer learning does "
                          "not map; prepare the corpus with a shared vocabulary, or unset it")


def train(cfg: Config, run_dir: Path, allow_world_size_change: bool = False,
          log: Callable[[str], None] = print, hooks: Optional[TrainHooks] = None,
          plan: Optional[TrainPlan] = None) -> TrainResult:
    """Train (or resume) the run in ``run_dir`` for ``cfg.train.train_steps`` optimizer steps
    (``hooks``: see :class:`TrainHooks`; ``plan``: ``cfg``'s :func:`validate_config`, where a
    driver that trains several times has it already; None: validated here)."""
    start = time.perf_counter()
    plan = validate_config(cfg) if plan is None else plan
    if hooks is None and cfg.train.elastic_commit_every != TrainConfig().elastic_commit_every:
        raise ConfigError("train.elastic_commit_every is used only by elastic training "
                          "(tf-nmt train --elastic under horovodrun --min-np/--max-np); unset it")
    # Gradient accumulation is implemented by Horovod's optimizer, so it needs Horovod even
    # for one process (launch with horovodrun -np 1, or it is initialised here).
    ctx = (hooks.context() if hooks is not None else
           distributed.init(enabled=True if cfg.train.backward_passes_per_step > 1 else None))
    chief_log = log if ctx.is_chief else (lambda _msg: None)
    run = RunDir(Path(run_dir))
    keras.utils.set_random_seed(cfg.train.seed)  # Python, NumPy and TF: reproducible init
    prepared = read_prepared(Path(cfg.data.data_dir))
    tokenizer = load_tokenizer_for_training(cfg, ctx, chief_log, prepared)
    # read before the run directory is written: a bad data.oversample source, a missing or
    # truncated shard, more ranks than pairs lose nothing
    if prepared.own:  # streamed: this rank's share of the pairs, in blocks of shards
        check_own_corpus(cfg, prepared)
        train_blocks, train_pairs = prepared.rank_blocks(
            ctx.size, ctx.rank, block_pairs(cfg.data.shuffle_buffer)), None
    else:  # the built-in corpus, held in memory
        train_blocks, train_pairs = None, load_train_pairs(Path(cfg.data.data_dir),
                                                           cfg.data.oversample)
    schedule = schedules.from_config(cfg.train, ctx.size)
    meta = run_meta(cfg, tokenizer, ctx.size, prepared.languages)
    saved_world_size = (run.read_meta() or {}).get("world_size", ctx.size)  # before it is rewritten
    # Whether to resume is the chief's decision: every rank must take the same path.
    resuming = bool(chief_value(int(check_resume(run, meta, allow_world_size_change=
                                                 allow_world_size_change)), ctx, "resume_decision"))
    check_execution_start(cfg.train, ctx.size, hooks is not None,
                          max(0, step_of(tf.train.latest_checkpoint(str(run.checkpoints))))
                          if resuming else 0)
    transfer.check_strategy(cfg.train.init_embeddings)
    parent = transfer.prepare_run(cfg, tokenizer) if cfg.train.init_from and not resuming else None
    # What this start runs with (kernels, op library, dtype policy): fallbacks said, and recorded.
    policy, policy_record = runtime.choose_policy(cfg.train.mixed_precision)
    runtime.log_fallbacks(plan.kernel_fallbacks, policy_record, chief_log)
    if ctx.is_chief:
        run.root.mkdir(parents=True, exist_ok=True)
        save_vocabularies(run, tokenizer)
        cfg.save(run.config_path)
        record = runtime.runtime_record(cfg.train, plan.kernels, plan.kernel_fallbacks,
                                        policy_record, resuming=resuming)
        run.write_meta(runtime.with_runtime(meta, run.read_meta(), record))

    vocab = TokenizerPair.of(tokenizer)
    model = build_and_compile(cfg, vocab.target.vocab_size, ctx, schedule=schedule, plan=plan,
                              policy=policy, source_vocab_size=vocab.source_vocab_size)
    num_params = int(sum(int(tf.size(v)) for v in model.trainable_variables))
    settings = plan.comm
    comm_callbacks = comm.comm_callbacks(  # start in sync, periodic sync, bytes/step
        settings, ctx, cfg.train.log_every, log=chief_log,
        stats_path=run.root / "comm_stats.json" if ctx.is_chief else None)
    checkpoint = make_checkpoint(model, model.optimizer,
                                 **comm.checkpoint_state(comm_callbacks, model))  # BMUF's W, Δ
    quantizer = retrain.from_train_config(model, cfg.train)  # None unless train.quantize_bits
    if quantizer is not None:  # residuals and scales are part of the run's state
        checkpoint.quantization = quantizer.state
    # train.ema_decay: the shadow weights (float32), checkpointed as ``ema``
    ema = WeightAverager(model, cfg.train.ema_decay) if cfg.train.ema_decay else None
    if ema is not None:
        setattr(checkpoint, EMA_KEY, ema.state)
    manager = make_manager(checkpoint, run.checkpoints, cfg.train.keep_checkpoints)
    # Ranks with state of their own (graddrop, fedavg, bmuf) also keep checkpoints/rank-<r>/.
    rank_manager = (make_rank_manager(checkpoint, run.checkpoints, ctx.rank,
                                      cfg.train.keep_checkpoints)
                    if settings.rank_checkpoints(ctx.size) else None)
    if resuming:  # the chief's word on a world size change, so that every rank agrees
        restored = restore_training_state(
            checkpoint, manager, rank_manager, ctx, log=chief_log,
            world_size_changed=bool(chief_value(int(saved_world_size != ctx.size), ctx,
                                                "world_size_changed")))
        if ema is not None and not checkpoint_has_ema(restored):
            ema.reset()
            chief_log(f"{restored} holds no EMA weights (trained with train.ema_decay=0): the "
                      "average starts from its weights")
    # An own corpus's stream positions (the elastic driver keeps them across attempts): read
    # from the restored checkpoint, then saved in every checkpoint (one written before has none).
    positions = ((getattr(hooks, "data_positions", None) or DataPositions())
                 if train_blocks is not None else None)
    if positions is not None:
        positions.restore(restored if resuming else None)
        setattr(checkpoint, POSITION_KEY, positions.record)
    # The dropout masks' seeds continue from the restored count (after the restore, as the data
    # positions: a checkpoint written before the count was kept has none and starts from 0).
    seeds = dropout.DropoutSeeds(cfg.train.seed)
    if not seeds.restore(restored if resuming else None) and resuming:
        chief_log(f"{restored} holds no dropout count (written by an older tf-nmt): the resumed "
                  "run draws other dropout masks than an uninterrupted one would have")
    setattr(checkpoint, dropout.CHECKPOINT_KEY, seeds.draws)
    resumed_from = int(model.optimizer.iterations.numpy())
    if parent is not None:  # a fresh run initialised from a parent model (never on resume)
        transfer.initialize_run(model, parent, log=chief_log,
                                record=run.root / "init_from.json" if ctx.is_chief else None)
    attached = hooks.attach(model, ctx, chief_log) if hooks is not None else []
    resumed_from = int(model.optimizer.iterations.numpy())

    data_dir = Path(cfg.data.data_dir)
    dev_corpus = encode_corpus(load_split(data_dir, "dev"), tokenizer)
    if train_blocks is not None:
        train_count = prepared.train_pairs
        # resumed where this rank's batch of step resumed_from was: nothing before it is read
        stream_start = positions.start(resumed_from, ctx, chief_log)
        train_ds = positions.track(
            rank_stream(train_blocks, cfg.data.batch_tokens, cfg.data.max_length,
                        seed=cfg.data.shuffle_seed + ctx.rank,
                        shuffle_buffer=cfg.data.shuffle_buffer,
                        bucket_width=cfg.data.length_bucket_width, start=stream_start),
            stream_start)
    else:
        train_corpus = encode_corpus(train_pairs, tokenizer)
        train_count = len(train_corpus)
        distributed.check_shards(train_count, ctx, what="training pairs")
        train_ds = make_dataset(train_corpus, cfg.data.batch_tokens, cfg.data.max_length,
                                shuffle=True, repeat=True, seed=cfg.data.shuffle_seed + ctx.rank,
                                num_shards=ctx.size, shard_index=ctx.rank,
                                shuffle_buffer=cfg.data.shuffle_buffer,
                                bucket_width=cfg.data.length_bucket_width)
        # The built-in corpus's seeded pipeline is deterministic, so skipping the batches
        # already consumed makes a resumed run see exactly the data an uninterrupted run would
        # have seen next (Horovod's optimizer.iterations counts backward passes, also with
        # gradient accumulation). Its corpus is small; an own corpus seeks instead (above).
        train_ds = train_ds.skip(resumed_from)
    distributed.check_shards(len(dev_corpus), ctx, what="dev pairs")
    dev_ds = make_dataset(dev_corpus, cfg.data.batch_tokens, cfg.data.max_length,
                          shuffle=False, repeat=False, num_shards=ctx.size, shard_index=ctx.rank,
                          bucket_width=cfg.data.length_bucket_width)
    chief_log(f"{cfg.model.kind}: {num_params:,} parameters, vocab {vocab.target.vocab_size}"
              + ("" if vocab.shared else f" (source {vocab.source.vocab_size})") + ", "
              f"{train_count:,} train pairs"
              + (f" (a data epoch: rank {ctx.rank} reads its share of "
                 f"{sum(b.count for b in train_blocks):,} once)" if train_blocks else "")
              + f", {'-'.join(prepared.languages)}, world size {ctx.size}"
              + (f", resuming from step {resumed_from}" if resuming else "")
              + (f" (rank 0's data from epoch {stream_start.epoch}, window {stream_start.window}, "
                 f"batch {stream_start.batch})" if resuming and train_blocks else ""))

    t = cfg.train
    cycle = t.steps_per_cycle
    if resumed_from >= t.train_steps:
        chief_log(f"already trained {resumed_from} >= {t.train_steps} steps; nothing to do")
        return TrainResult(resumed_from, resumed_from, time.perf_counter() - start,
                           num_parameters=num_params)
    progress = cb.ProgressLogger(
        t.log_every, t.train_steps, log=chief_log, world_size=ctx.size,
        sum_across_ranks=((lambda v: distributed.allreduce_sum(v, ctx, name="progress_tokens"))
                          if ctx.distributed else None),
        jsonl_path=run.root / cb.PROGRESS_LOG if ctx.is_chief else None,
        time_budget_minutes=t.time_budget_minutes)
    guard = cb.DivergenceGuard(t.divergence_factor)
    # Ranks agree on the time every log_every steps (one scalar allreduce), so they stop at
    # the same step and a timed cool-down gives them the same rate.
    budget = cb.TimeBudget(
        t.time_budget_minutes, log=chief_log, clock=schedules.cooldown_clock(schedule),
        agree=((lambda v: distributed.allreduce_sum(v, ctx, name="time_budget") / ctx.size)
               if ctx.distributed else None),
        every=t.log_every if ctx.distributed else 1)
    # A rank's own checkpoint is saved before the comm callbacks' last sync (the state training
    # continues from), the chief's after it (the synchronised model); comm callbacks come first.
    callbacks: List[keras.callbacks.Callback] = (  # positions gathered before any save
        [DataPositionCallback(positions, ctx, chief_log)] if positions is not None else [])
    callbacks += [cb.CheckpointSaver(rank_manager, guard, log=lambda _m: None)] if rank_manager else []
    callbacks += comm_callbacks
    callbacks += [quantizer] if quantizer is not None else []  # before anything saves weights
    callbacks += [cb.WeightEMA(ema)] if ema is not None else []  # of the weights as saved
    callbacks += [guard, budget, cb.StepLimit(t.train_steps), progress] + attached
    if ctx.is_chief:
        callbacks += [cb.CheckpointSaver(manager, guard, log=chief_log),
                      keras.callbacks.TensorBoard(str(run.logs), update_freq=t.log_every,
                                                  write_graph=False, profile_batch=0)]
    epochs = math.ceil(t.train_steps / cycle)
    # The dev set's batches, counted once: Keras runs several steps per call only over data of
    # known size, and Keras 3 warns "Your input ran out of data; interrupting training" after
    # every pass over a dataset of unknown size (each cycle's dev loss).
    dev_steps = int(dev_ds.reduce(0, lambda count, _batch: count + 1))
    dev_ds = dev_ds.apply(tf.data.experimental.assert_cardinality(dev_steps))
    with dropout.seeded_by(seeds):
        history = model.fit(train_ds, steps_per_epoch=cycle, epochs=epochs, shuffle=False,
                            initial_epoch=resumed_from // cycle, validation_data=dev_ds,
                            validation_steps=dev_steps, callbacks=callbacks, verbose=0)
    if guard.error is not None:
        raise guard.error
    val_loss = [float(v) for v in history.history.get("val_loss", [])]
    for epoch, value in zip(history.epoch, val_loss):
        chief_log(f"cycle {epoch + 1}: dev loss {value:.4f}")
    return TrainResult(final_step=int(model.optimizer.iterations.numpy()), resumed_from=resumed_from,
                       wall_seconds=time.perf_counter() - start, history=progress.history,
                       val_loss=val_loss, num_parameters=num_params,
                       stopped_by_time_budget=budget.stopped_early)

