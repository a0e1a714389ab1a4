"""Run configuration: typed sections, loaded from YAML/JSON and ``--set section.key=value``.

Unknown sections or keys are errors (with a "did you mean" hint): a typo must never silently
fall back to a default in a 30-minute training run.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import yaml

from tf_nmt.modes import COMM_MODES, HOROVOD_MODES, SCHEDULE_KEYS  # noqa: F401 (re-exported)
from tf_nmt.errors import UserError
from tf_nmt.utils.io import write_text_atomic


class ConfigError(UserError, ValueError):
    """An invalid configuration: unknown key, wrong type or bad value."""


@dataclass(frozen=True)
class Range:
    """The valid values of a numeric key, declared beside its field (``metadata={"range": ...}``)
    and checked whenever a config is loaded: ``lo``..``hi`` (None: unbounded), each end included
    unless ``lo_open``/``hi_open``, always finite; ``off``: one more value, outside that, which
    turns the feature off (e.g. 0); ``integer``: whole numbers only (for values no field type
    coerces: a mapping's, a model hyper-parameter's); ``null``: None too ("take the default"). For
    a mapping key, every value of the mapping."""

    lo: Optional[float] = None
    hi: Optional[float] = None
    lo_open: bool = False
    hi_open: bool = False
    off: Optional[float] = None
    integer: bool = False
    null: bool = False

    def __contains__(self, value: Any) -> bool:
        if value is None:
            return self.null
        if isinstance(value, bool) or not isinstance(value, int if self.integer else (int, float)):
            return False
        if self.off is not None and value == self.off:
            return True
        if not math.isfinite(value):
            return False
        if self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo):
            return False
        return self.hi is None or (value < self.hi if self.hi_open else value <= self.hi)

    def __str__(self) -> str:
        if self.lo is not None and self.hi is not None:
            text = (f"{'(' if self.lo_open else '['}{self.lo}, {self.hi}"
                    f"{')' if self.hi_open else ']'}")
        elif self.lo is not None:
            text = f"{'>' if self.lo_open else '>='} {self.lo}"
        elif self.hi is not None:
            text = f"{'<' if self.hi_open else '<='} {self.hi}"
        else:
            text = "finite"
        text = f"an integer {text}" if self.integer else text
        text = text if self.off is None else f"{self.off} (off) or {text}"
        return f"null or {text}" if self.null else text


@dataclass(frozen=True)
class Choices:
    """The values an enumerated key accepts, declared beside its field
    (``metadata={"choices": ...}``); ``what`` names such a value in the error ("mode")."""

    values: Tuple[Any, ...]
    what: str = "value"

    def shown(self) -> List[str]:
        """The values as a user writes them (``true``/``false`` for booleans)."""
        return [str(v).lower() if isinstance(v, bool) else str(v) for v in self.values]


SEED = Range(0, 2**32 - 1)  # what NumPy's seeding takes
KERNELS = Choices(("auto", "fused", "tf"), "kernel")  # tf_nmt.models.kernels.KERNEL_SETTINGS

# The valid values of the model hyper-parameters (``model.NAME`` keys; their defaults are the
# models' TRANSFORMER_DEFAULTS and GNMT_DEFAULTS, which name is valid for which kind is checked by
# tf_nmt.models.check_model_config). Every numeric or enumerated one has its line here.
MODEL_HPARAMS: Dict[str, Any] = {
    "num_layers": Range(1, integer=True),
    "num_encoder_layers": Range(1, integer=True, null=True),  # null: num_layers
    "num_decoder_layers": Range(1, integer=True, null=True),
    "d_model": Range(1, integer=True),
    "num_heads": Range(1, integer=True),
    "ff_dim": Range(1, integer=True),
    "dropout": Range(0, 1, hi_open=True),
    "attention_dropout": Range(0, 1, hi_open=True),
    "norm": Choices(("pre", "post"), "norm"),
    "units": Range(1, integer=True),
    "embedding_dim": Range(1, integer=True, null=True),  # null: units
    "attention": Choices(("luong", "bahdanau"), "attention"),
}


# The gradient-communication modes ``train.comm`` accepts and the schedules ``train.schedule``
# names are registered in tf_nmt.modes (their keys and what each supports): Horovod with
# IndexedSlices densified and allreduced (sparse_as_dense) or allgathered (dense), gradient
# dropping (graddrop), model averaging (fedavg) and blockwise model-update filtering (bmuf).

# Keys that no longer exist: (section, key) -> (the value every saved config.yaml of older runs
# holds, which is dropped when read from a file, and what to use instead). Any other value, or
# any value given as an override, is a ConfigError naming the replacement.
RETIRED_KEYS: Dict[tuple, tuple] = {
    ("train", "sparse_as_dense"): (
        True, "it duplicated train.comm: use train.comm=sparse_as_dense (embedding gradients "
              "densified and allreduced, the default) or train.comm=dense (allgathered)"),
}


@dataclass
class DataConfig:
    data_dir: str = field(default="data_cache", metadata={
        "help": "the prepared data directory: corpus/{train,dev,test}.{en,de} and "
                "vocab/spm-<vocab_size>.model (`--data-dir` overrides it)"})
    vocab_size: int = field(default=8000, metadata={
        "range": Range(5),
        "help": "pieces in the shared SentencePiece vocabulary; the built-in corpus: selects "
                "DATA_DIR/vocab/spm-<vocab_size>.model, learned from the train split when missing; "
                "an own corpus (prepare-data --train-*): its prepared vocabulary, whose size this "
                "must equal when given"})
    max_length: int = field(default=100, metadata={
        "range": Range(1),
        "help": "longest training/dev pair kept, in subword tokens with bos/eos; longer pairs "
                "are dropped"})
    batch_tokens: int = field(default=4096, metadata={
        "range": Range(2),
        "help": "token budget of a batch, per worker: batch size x padded length stays within it"})
    length_bucket_width: int = field(default=1, metadata={
        "range": Range(0),
        "help": "length buckets of this many lengths (1: every pair of a batch has the same "
                "longer side, as OpenNMT-tf does); 0: geometric buckets"})
    shuffle_seed: int = field(default=1234, metadata={
        "range": SEED,
        "help": "seed of the training data shuffle (each worker adds its rank)"})
    shuffle_buffer: int = field(default=100_000, metadata={
        "range": Range(1),
        "help": "pairs each worker holds for shuffling the training data (the memory bound when "
                "streaming an own corpus's shards); the in-memory built-in corpus uses at most "
                "its pairs per worker"})
    # Repeat the train pairs of a source K times ({source: K}, sources as in train.meta.tsv,
    # e.g. {ding: 3}): up-weights a domain (tf_nmt.data.weighting). Empty: every pair once.
    oversample: Dict[str, int] = field(default_factory=dict, metadata={
        "range": Range(1, integer=True),
        "help": "repeat the train pairs of a source K times, {source: K} with sources as in "
                "train.meta.tsv (e.g. {ding: 3}) to up-weight a domain; empty: every pair once"})


@dataclass
class ModelConfig:
    kind: str = field(default="transformer", metadata={
        "choices": Choices(("transformer", "gnmt"), "model kind"),
        "help": "the model: transformer or gnmt (the GNMT-style LSTM)"})
    hparams: Dict[str, Any] = field(default_factory=dict, metadata={
        "help": "model hyper-parameters, given as model.NAME keys (e.g. model.d_model=512); "
                "names the model does not have are refused; unset ones take the model's defaults"})


@dataclass
class TrainConfig:
    train_steps: int = field(default=2000, metadata={
        "range": Range(1),
        "help": "optimizer steps to train to, in total (a resume continues up to it)"})
    steps_per_cycle: int = field(default=250, metadata={
        "range": Range(1),
        "help": "steps between dev-loss evaluations and checkpoints"})
    optimizer: str = field(default="adam", metadata={
        "choices": Choices(("adam", "sgd"), "optimizer"), "help": "adam or sgd"})
    beta_1: float = field(default=0.9, metadata={
        "range": Range(0, 1, hi_open=True), "help": "Adam's beta_1"})
    beta_2: float = field(default=0.98, metadata={
        "range": Range(0, 1, hi_open=True), "help": "Adam's beta_2"})
    epsilon: float = field(default=1e-9, metadata={
        "range": Range(0, lo_open=True), "help": "Adam's epsilon"})
    clip_norm: float = field(default=0.0, metadata={
        "range": Range(0),
        "help": "gradient clipping, 0 = off: Keras clipnorm (each gradient tensor's norm) in "
                "`tf-nmt train`; in `tf-nmt train-async` each worker gradient's global norm "
                "(Downpour)"})
    schedule: str = field(default="warmup_inverse_sqrt", metadata={
        "choices": Choices(tuple(SCHEDULE_KEYS), "schedule"),
        "help": "learning-rate schedule: warmup_inverse_sqrt, inverse_sqrt, linear_warmup, "
                "step_decay or constant"})
    schedule_implementation: str = field(default="python", metadata={
        "choices": Choices(("python", "op"), "implementation"),
        "help": "python, or op: the C++ kernel (warmup_inverse_sqrt, inverse_sqrt and "
                "linear_warmup only)"})
    peak_lr: float = field(default=1e-3, metadata={
        "range": Range(0, lo_open=True),
        "help": "peak learning rate; multiplied by the number of workers when "
                "scale_lr_with_workers"})
    warmup_steps: int = field(default=400, metadata={
        "range": Range(1),
        "help": "steps of linear warm-up to peak_lr; divided by the number of workers (rounded "
                "up) when scale_lr_with_workers"})
    decay_start: int = field(default=0, metadata={
        "range": Range(0),
        "help": "step_decay: the step after which the rate starts to decay"})
    decay_every: int = field(default=1000, metadata={
        "range": Range(1),
        "help": "step_decay: multiply the rate by decay_factor once every this many steps"})
    decay_factor: float = field(default=0.5, metadata={
        "range": Range(0, 1, lo_open=True), "help": "step_decay: the factor"})
    # Linear fall of the rate to 0 over the last fraction of the run (steps or time budget,
    # whichever is further along); 0 = off. See tf_nmt.training.schedules.Cooldown.
    cooldown_fraction: float = field(default=0.0, metadata={
        "range": Range(0, 1),
        "help": "linear fall of the rate to 0 over this last fraction of the run (in steps or "
                "time budget, whichever is further along); 0 = off"})
    label_smoothing: float = field(default=0.1, metadata={
        "range": Range(0, 1, hi_open=True),
        "help": "label smoothing of the cross-entropy loss"})
    # The loss's kernel (tf_nmt.models.losses.resolve_loss_kernel): "fused" is the C++ op, one
    # pass over the [B*T, V] logits each way; "tf" composes TensorFlow's sparse cross-entropy;
    # "auto" takes fused on a CPU-only machine with AVX2+FMA or AVX-512 and the custom-op
    # library, else tf (tf_nmt.models.kernels.resolve_kernel).
    loss_kernel: str = field(default="auto", metadata={
        "choices": KERNELS,
        "help": "the loss's kernel: fused (C++ op, one pass over the logits each way), tf "
                "(TensorFlow's cross-entropy) or auto (fused on a CPU-only machine with AVX2+FMA "
                "or AVX-512 and the op library, not under jit_compile; else tf)"})
    # The dropout layers' kernel (tf_nmt.models.dropout.resolve_dropout_kernel): "fused" is the
    # C++ seeded dropout op (mask regenerated from a seed, one pass each way); "tf" is Keras's
    # dropout; "auto" takes fused where loss_kernel's auto would. Used by `tf-nmt train`.
    dropout_kernel: str = field(default="auto", metadata={
        "choices": KERNELS,
        "help": "the dropout layers' kernel: fused (C++ seeded dropout, mask regenerated from a "
                "seed), tf (Keras's) or auto (fused where loss_kernel's auto would be)"})
    # The layer norms' kernel (tf_nmt.models.layer_norm.resolve_norm_kernel): "fused" is the C++
    # op, one pass over each row forward and one backward; "tf" is Keras's LayerNormalization
    # (unfused at epsilon 1e-6); "auto" takes fused where loss_kernel's auto would.
    norm_kernel: str = field(default="auto", metadata={
        "choices": KERNELS,
        "help": "the layer norms' kernel: fused (C++ op, one pass over each row each way), tf "
                "(Keras's LayerNormalization) or auto (fused where loss_kernel's auto would be)"})
    keep_checkpoints: int = field(default=5, metadata={
        "range": Range(1),
        "help": "checkpoints kept in RUN_DIR/checkpoints (older ones are deleted)"})
    # Weight EMA (tf_nmt.models.ema): shadow = d*shadow + (1-d)*w after every optimizer step,
    # d = min(ema_decay, (1+s)/(10+s)) (0 at the first step), kept in the checkpoints; evaluate,
    # export, quantize and average-checkpoints load it where a checkpoint holds it (--weights).
    ema_decay: float = field(default=0.0, metadata={
        "range": Range(0, 1, hi_open=True),
        "help": "exponential moving average of the weights, kept in the checkpoints next to the "
                "raw ones (what evaluate/export/quantize/average-checkpoints load where a "
                "checkpoint holds it; --weights raw for the others); decay in [0, 1), 0 = off "
                "(the quickstart Transformer: 0.999). Warm-up min(decay, (1+step)/(10+step)), "
                "the first step copies the weights. tf-nmt train and quickstart, with train.comm "
                "dense or sparse_as_dense (the ranks share the weights; rank 0's checkpoints "
                "hold the EMA) and "
                "train.steps_per_execution=1, backward_passes_per_step=1"})
    log_every: int = field(default=50, metadata={
        "range": Range(1),
        "help": "steps between progress lines (and progress.jsonl and TensorBoard entries)"})
    seed: int = field(default=1234, metadata={
        "range": SEED,
        "help": "random seed of the initialisation (Python, NumPy and TensorFlow)"})
    divergence_factor: float = field(default=4.0, metadata={
        "range": Range(1, off=0),
        "help": "stop when the loss exceeds this many times the best cycle's loss (a NaN/Inf "
                "loss always stops); 0 = only NaN/Inf"})
    time_budget_minutes: float = field(default=0.0, metadata={
        "range": Range(0),
        "help": "stop training after this many minutes (0 = no budget); the clock restarts on "
                "resume"})
    scale_lr_with_workers: bool = field(default=True, metadata={
        "help": "scale peak_lr (x N) and warmup_steps (/ N) with the number of workers N"})
    backward_passes_per_step: int = field(default=1, metadata={
        "range": Range(1),
        "help": "accumulate this many local batches per update (Horovod's optimizer; dense and "
                "sparse_as_dense only)"})
    # `tf-nmt train --elastic` (tf_nmt.training.elastic): commit the in-memory state every K steps;
    # a lost worker costs at most the steps since the last commit.
    elastic_commit_every: int = field(default=50, metadata={
        "range": Range(1),
        "help": "`tf-nmt train --elastic` only: commit the in-memory state every this many steps "
                "(a lost worker costs at most the steps since the last commit)"})
    # A rollback that never gets past the same commit (a fault that repeats, not a lost worker)
    # must end the job instead of being retried forever.
    elastic_max_retries: int = field(default=10, metadata={
        "range": Range(1),
        "help": "`tf-nmt train --elastic` only: give up with an error after this many rollbacks "
                "in a row that resume from the same committed step (a lost worker that keeps "
                "failing the job, not one lost now and then); >= 1"})
    # Re-training under quantisation (tf_nmt.quantization.retrain): 0 = off, else B in 1..8 bits;
    # after every update the matrices (and with quantize_biases the vectors) are re-quantised.
    quantize_bits: int = field(default=0, metadata={
        "range": Range(1, 8, off=0),
        "help": "re-train under B-bit weight quantisation, B in 1..8 (0 = off): the weights are "
                "re-quantised after every update"})
    quantize_kind: str = field(default="log", metadata={
        "choices": Choices(("log", "fixed"), "quantiser kind"),
        "help": "re-training quantiser: log or fixed"})
    quantize_scale: str = field(default="optimised", metadata={
        "choices": Choices(("unscaled", "max", "optimised"), "scale"),
        "help": "re-training scale per tensor: unscaled (S = 1), max (S = max|w|) or optimised "
                "(an iterated least-squares fit)"})
    quantize_biases: bool = field(default=False, metadata={
        "help": "re-training: also quantise biases and layer-norm vectors (default: they stay "
                "float32)"})
    quantize_error_feedback: bool = field(default=True, metadata={
        "help": "re-training: keep the quantisation error as a residual added back before the "
                "next quantisation"})
    # Log-quantised matmul inputs (tf_nmt.models.activation_quant; thesis Table 7.4): 0 = off,
    # else B in 1..8 bits (4 in the thesis). Every activation entering a matmul with a weight
    # matrix becomes +-S * 2^-k, k < 2^(B-1), straight-through gradient; evaluate, translate and
    # export apply the same. S is FIXED (no per-product fit): a constant, e.g. 1.0 for inputs
    # that are layer-normalised or LSTM states, or calibrated once on a trained model with
    # activation_quant.calibrate_scale (the optimised log scale of its recorded matmul inputs) and
    # then frozen here. Use with quantize_bits=4 (re-trained 4-bit weights).
    quantize_activations_bits: int = field(default=0, metadata={
        "range": Range(1, 8, off=0),
        "help": "log-quantise every matmul input with a weight matrix to B bits, B in 1..8 (0 = "
                "off): +-S * 2^-k with a straight-through gradient; evaluate, translate and export "
                "apply it too"})
    quantize_activations_scale: float = field(default=1.0, metadata={
        "range": Range(0, lo_open=True),
        "help": "the fixed scale S of quantize_activations_bits: a constant, or calibrated once "
                "with tf_nmt.models.activation_quant.calibrate_scale and frozen here"})
    # bfloat16 activations/matmuls with float32 variables (Keras "mixed_bfloat16"): ~2.5x faster
    # matmuls on CPUs with AMX/AVX512-BF16; checkpoints stay float32. "auto" (the presets'):
    # tf_nmt.training.precision.decide.
    mixed_precision: Union[bool, str] = field(default=False, metadata={
        "choices": Choices((False, True, "auto"), "precision"),
        "help": "mixed precision with float32 variables: bfloat16 on CPUs and GPUs of compute "
                "capability >= 8.0, float16 with loss scaling on older GPUs; checkpoints stay "
                "float32. auto: mixed on a GPU or a CPU with native bfloat16 (avx512_bf16, "
                "amx_bf16), float32 on other CPUs"})
    # Compile the train step with XLA (Keras jit_compile). One process, stock ops only: Horovod's
    # collectives and this package's custom ops have no XLA kernels. Every new batch shape
    # compiles once (the token buckets bound how many there are).
    jit_compile: bool = field(default=False, metadata={
        "help": "compile the train step with XLA; one process and stock ops only (Horovod and the "
                "custom ops have no XLA kernels)"})
    # Training steps per call of the compiled train function (Keras steps_per_execution): the
    # steps of a call run in one graph loop, with no Python and no host sync between them, and
    # the per-step callbacks run once per call. One process and comm dense or sparse_as_dense
    # only (the other modes act between steps); it must divide steps_per_cycle, log_every and
    # train_steps (tf_nmt.training.trainer.check_steps_per_execution).
    steps_per_execution: int = field(default=1, metadata={
        "range": Range(1),
        "help": "training steps per call of the compiled train function; one process, comm dense "
                "or sparse_as_dense, and it must divide steps_per_cycle, log_every and train_steps"})
    # Gradient communication, one of COMM_MODES (tf_nmt.distributed.comm); graddrop, fedavg and
    # bmuf use the keys below.
    comm: str = field(default="sparse_as_dense", metadata={
        "choices": Choices(COMM_MODES, "mode"),
        "help": "gradient communication: sparse_as_dense, dense, graddrop, fedavg or bmuf "
                "(`tf-nmt train --comm`)"})
    drop_ratio: float = field(default=0.99, metadata={
        "range": Range(0, 1, hi_open=True),
        "help": "graddrop: fraction R of gradient entries dropped each step, in [0, 1)"})
    drop_threshold: str = field(default="global", metadata={
        "choices": Choices(("global", "per_tensor"), "threshold"),
        "help": "graddrop: one threshold across all tensors (global) or one per tensor "
                "(per_tensor)"})
    drop_warmup_steps: int = field(default=1000, metadata={
        "range": Range(0),
        "help": "graddrop: the drop ratio ramps up to drop_ratio over these steps"})
    # linear: R rises linearly (most of the gradient is still sent for much of the warm-up);
    # geometric: the kept fraction 1 - R falls geometrically from 1 (Deep Gradient Compression's
    # exponential warm-up), which sends far less during the warm-up.
    drop_warmup_shape: str = field(default="linear", metadata={
        "choices": Choices(("linear", "geometric"), "warm-up shape"),
        "help": "graddrop: linear (R rises linearly) or geometric (the kept fraction 1 - R falls "
                "geometrically from 1, sending far less during the warm-up)"})
    error_feedback: bool = field(default=True, metadata={
        "help": "graddrop: keep the dropped part as a residual added to the next gradient"})
    local_gradients: bool = field(default=False, metadata={
        "help": "graddrop: each rank applies its own full gradient in place of the sparse part "
                "it sent, C = G + (L - S) / N, and parameters are averaged every average_every "
                "steps"})
    one_bit: bool = field(default=False, metadata={
        "help": "graddrop: 1-bit quantise the kept values (sent as sign bits + column means)"})
    average_every: int = field(default=500, metadata={
        "range": Range(1),
        "help": "parameter averaging period P in steps (fedavg, bmuf, graddrop with "
                "local_gradients)"})
    bmuf_block_momentum: float = field(default=0.5, metadata={
        "range": Range(0, 1, hi_open=True),
        "help": "bmuf: block momentum, in [0, 1)"})
    bmuf_block_lr: float = field(default=1.0, metadata={
        "range": Range(0, lo_open=True), "help": "bmuf: block learning rate, > 0"})
    bmuf_nesterov: bool = field(default=True, metadata={
        "help": "bmuf: Nesterov-style block update"})
    # Transfer learning (tf_nmt.training.transfer): a parent run dir or checkpoint prefix whose
    # weights initialise a fresh run; how embedding rows are mapped; keep the LR warm-up or not.
    init_from: str = field(default="", metadata={
        "help": "a parent run directory or checkpoint prefix whose weights initialise a fresh run "
                "(`--init-from`; ignored on resume)"})
    init_embeddings: str = field(default="token-match", metadata={
        "choices": Choices(("token-match", "exclude", "random", "frequency"), "strategy"),
        "help": "how parent embedding rows initialise the child's: token-match, exclude, random "
                "or frequency (`--embeddings`)"})
    init_warmup: bool = field(default=True, metadata={
        "help": "with init_from: keep the learning-rate warm-up (false: `--no-warmup`)"})


@dataclass
class DecodeConfig:
    beam_size: int = field(default=4, metadata={
        "range": Range(1),
        "help": "beam width of evaluate, translate and export (1: greedy search)"})
    length_penalty: float = field(default=0.6, metadata={
        "range": Range(0),
        "help": "GNMT length penalty alpha of beam search"})
    batch_size: int = field(default=64, metadata={
        "range": Range(1),
        "help": "sentences per batch in `tf-nmt evaluate`"})


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def __post_init__(self) -> None:
        # The dotted keys ("train.warmup_steps", "model.d_model") explicitly given, and by whom:
        # one of GIVEN_ORIGINS. Not a field: it is neither compared nor saved. What the run
        # ignores of them is refused (tf_nmt.config_usage.check_given).
        self.given: Dict[str, str] = {}

    def mark_given(self, dotted: str, origin: str = "flag") -> None:
        """Record that ``dotted`` was given explicitly (e.g. by a command-line flag)."""
        if origin not in GIVEN_ORIGINS:
            raise ValueError(f"unknown origin {origin!r}; use one of {GIVEN_ORIGINS}")
        self.given[dotted] = origin

    def given_by_user(self) -> List[str]:
        """The keys the user gave (config file, --set, a flag), not a preset; sorted."""
        return sorted(k for k, origin in self.given.items() if origin != "preset")

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    def save(self, path: Path) -> None:
        """Write the resolved config as YAML, atomically."""
        write_text_atomic(Path(path), yaml.safe_dump(self.to_dict(), sort_keys=False))


# Who gave a key: a preset (or the quickstart's recipe), a config file, --set, or a CLI flag.
GIVEN_ORIGINS = ("preset", "file", "set", "flag")

_SECTION_TYPES = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig, "decode": DecodeConfig}


def _unknown(kind: str, name: str, valid: List[str]) -> ConfigError:
    hint = difflib.get_close_matches(name, valid, n=1)
    extra = f"; did you mean {hint[0]!r}?" if hint else ""
    return ConfigError(f"unknown {kind} {name!r}{extra} (valid: {', '.join(sorted(valid))})")


def _coerce(section: str, key: str, value: Any, target: Any,
            spec: Optional[dataclasses.Field] = None) -> Any:
    """Convert ``value`` to the type of the field default ``target`` (bool/int/float/str/dict);
    a bool field whose choices add ``auto`` (:func:`_takes_auto`) also takes the string ``auto``."""
    if spec is not None and _takes_auto(spec):
        if isinstance(value, str) and value.lower() == "auto":
            return "auto"
        try:  # a bool as any bool field takes it (against the default, not a current "auto")
            return _coerce(section, key, value, spec.default)
        except ConfigError:
            return value  # refused by its choices, named with them (_check_value)
    if isinstance(target, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
    elif isinstance(target, (int, float)):
        number = int if isinstance(target, int) else float
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if number is float or isinstance(value, int) or value.is_integer():
                return number(value)
        if isinstance(value, str):
            try:
                return number(value)
            except ValueError:
                pass
    elif isinstance(target, str):
        if isinstance(value, str):
            return value
    elif isinstance(target, dict):
        if isinstance(value, dict):
            return dict(value)
    raise ConfigError(f"{section}.{key}: expected {type(target).__name__}, got {value!r}")


def _takes_auto(spec: dataclasses.Field) -> bool:
    """A bool field whose choices add ``"auto"`` (``train.mixed_precision``)."""
    valid = spec.metadata.get("choices")
    return isinstance(spec.default, bool) and isinstance(valid, Choices) and "auto" in valid.values


def _check_value(dotted: str, value: Any, valid: Any) -> None:
    """ConfigError unless ``value`` lies in ``valid``: a :class:`Range` (of each value, for a
    mapping), :class:`Choices`, or None (anything)."""
    if isinstance(valid, Choices) and (value not in valid.values or (
            isinstance(value, (int, float)) and not isinstance(value, bool))):
        raise ConfigError(f"{dotted}: {_unknown(valid.what, str(value), valid.shown())}")
    if isinstance(valid, Range):
        for name, number in (value.items() if isinstance(value, dict) else [(None, value)]):
            if number not in valid:
                where = dotted if name is None else f"{dotted}[{name!r}]"
                raise ConfigError(f"{where}={number!r} is out of range (valid: {valid})")


def valid_values(spec: dataclasses.Field) -> Any:
    """The :class:`Range` or :class:`Choices` a config field declares (None: any value)."""
    return spec.metadata.get("range", spec.metadata.get("choices"))


def _parse_scalar(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _retired(section: str, key: str, value: Any, from_file: bool) -> bool:
    """True when ``section.key`` is a retired key whose saved default may be dropped; raises
    ConfigError for any other use of a retired key (an override, or another value)."""
    if (section, key) not in RETIRED_KEYS:
        return False
    saved_default, replacement = RETIRED_KEYS[(section, key)]
    if from_file and value == saved_default:
        return True
    raise ConfigError(f"{section}.{key} was retired: {replacement}")


def config_from_dict(raw: Dict[str, Any], base: Optional[Config] = None,
                     from_file: bool = True, origin: Optional[str] = None) -> Config:
    """Merge ``raw`` ({section: {key: value}}) into ``base`` (default: defaults), validating keys.

    ``from_file``: ``raw`` was read from a saved config, so a retired key holding the value older
    runs saved (see :data:`RETIRED_KEYS`) is dropped instead of refused. ``origin``: who gave
    the keys, recorded in ``Config.given`` (default: ``file``, or ``set`` when not from_file).
    """
    origin = origin or ("file" if from_file else "set")
    cfg = _copy(base or Config())
    if not isinstance(raw, dict):
        raise ConfigError(f"a config must be a mapping of sections, got {type(raw).__name__}")
    for section, values in raw.items():
        if section not in _SECTION_TYPES:
            raise _unknown("config section", section, list(_SECTION_TYPES))
        if not isinstance(values, dict):
            raise ConfigError(f"config section {section!r} must be a mapping")
        obj = getattr(cfg, section)
        specs = {f.name: f for f in dataclasses.fields(obj)}
        names = list(specs)
        for key, value in values.items():
            if section == "model" and key not in names:
                # The name is checked against the kind's by build_model; the value here.
                _check_value(f"model.{key}", value, MODEL_HPARAMS.get(key))
                obj.hparams[key] = value
                cfg.mark_given(f"{section}.{key}", origin)
                continue
            if key not in names:
                if _retired(section, key, value, from_file):
                    continue
                raise _unknown(f"key in [{section}]", key, names)
            coerced = _coerce(section, key, value, getattr(obj, key), specs[key])
            _check_value(f"{section}.{key}", coerced, valid_values(specs[key]))
            if section == "model" and key == "hparams":  # as a saved config.yaml holds them
                for name, hparam in coerced.items():
                    _check_value(f"model.{name}", hparam, MODEL_HPARAMS.get(name))
            setattr(obj, key, coerced)
            # A file that spells out a default (e.g. a run's saved config.yaml, copied to start a
            # new run) gives nothing: only its keys that differ from the default count as given.
            if origin != "file" or coerced != getattr(type(obj)(), key):
                cfg.mark_given(f"{section}.{key}", origin)
    return cfg


def _copy(cfg: Config) -> Config:
    copy = Config(
        data=dataclasses.replace(cfg.data, oversample=dict(cfg.data.oversample)),
        model=ModelConfig(kind=cfg.model.kind, hparams=dict(cfg.model.hparams)),
        train=dataclasses.replace(cfg.train),
        decode=dataclasses.replace(cfg.decode),
    )
    copy.given.update(getattr(cfg, "given", {}))
    return copy


def load_config(path: Optional[Path] = None, overrides: Optional[List[str]] = None,
                base: Optional[Config] = None, origin: Optional[str] = None) -> Config:
    """Defaults ← ``path`` (YAML or JSON) ← ``overrides`` (``section.key=value`` strings).

    Every key read is recorded in ``Config.given`` as given by ``origin`` (default: ``file``
    for the file's keys, ``set`` for the overrides')."""
    cfg = _copy(base or Config())
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        text = path.read_text()
        try:
            raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (json.JSONDecodeError, yaml.YAMLError) as err:
            raise ConfigError(f"cannot parse config {path}: {err}") from err
        cfg = config_from_dict(raw or {}, cfg, origin=origin)
    for item in overrides or []:
        if "=" not in item or "." not in item.split("=", 1)[0]:
            raise ConfigError(f"override must look like section.key=value, got {item!r}")
        dotted, value = item.split("=", 1)
        section, key = dotted.split(".", 1)
        cfg = config_from_dict({section: {key: _parse_scalar(value)}}, cfg, from_file=False,
                               origin=origin)
    return cfg


# Every preset trains with train.mixed_precision=auto: bfloat16 where the CPU (or a GPU) computes
# it natively, float32 elsewhere (tf_nmt.training.precision.decide).
PRESETS: Dict[str, Dict[str, Any]] = {
    # A Transformer small enough to train to a useful BLEU on 2 CPU cores in ~45 minutes.
    "quickstart": {
        "model": {"kind": "transformer", "num_layers": 3, "d_model": 256, "num_heads": 4,
                  "ff_dim": 1024, "dropout": 0.1},
        # peak_lr 2e-3 / warm-up 300 (was 1e-3 / 400): dev loss 5.68/4.93/4.62 vs 6.12/5.19/4.82
        # at steps 250/500/750 in a same-seed pilot on the real corpus (pre-norm tolerates it).
        "train": {"peak_lr": 2e-3, "warmup_steps": 300, "steps_per_cycle": 250,
                  "mixed_precision": "auto"},
    },
    "gnmt-small": {
        "model": {"kind": "gnmt", "num_layers": 2, "units": 256, "attention": "luong",
                  "dropout": 0.1},
        "train": {"schedule": "step_decay", "peak_lr": 1e-3, "decay_start": 2000,
                  "decay_every": 500, "steps_per_cycle": 250, "mixed_precision": "auto"},
    },
    # The WMT-scale presets below give their peak learning rate for the whole (global) batch, so
    # they turn off train.scale_lr_with_workers: more workers then mean a bigger batch, not a
    # larger rate. docs/distributed.md "The big-batch recipe" says how to raise peak_lr with the
    # batch. They leave data.vocab_size alone: an own corpus's vocabulary comes from its manifest.
    #
    # Transformer base, Vaswani et al. 2017 ("Attention Is All You Need"), Table 3 row "base" and
    # section 5: 6+6 layers, d_model 512, 8 heads, feed-forward 2048, dropout 0.1, post-norm
    # (LayerNorm(x + Sublayer(x)), section 3.1), no attention dropout, label smoothing 0.1, one
    # embedding shared by both sides and the output (section 3.4), 100k steps. Their rate,
    # d_model^-0.5 * min(s^-0.5, s * 4000^-1.5), is train.schedule=warmup_inverse_sqrt with a
    # 4,000-step warm-up to 512^-0.5 * 4000^-0.5 = 6.99e-4 (rounded to 7e-4). Adam 0.9/0.98/1e-9
    # and beam 4 with length penalty 0.6 are already tf-nmt's defaults. About 60.6M parameters
    # with a 32k shared vocabulary (tests/models/test_presets.py counts them).
    "transformer-base": {
        "model": {"kind": "transformer", "num_layers": 6, "d_model": 512, "num_heads": 8,
                  "ff_dim": 2048, "dropout": 0.1, "attention_dropout": 0.0, "norm": "post"},
        "train": {"schedule": "warmup_inverse_sqrt", "peak_lr": 7e-4, "warmup_steps": 4000,
                  "scale_lr_with_workers": False, "label_smoothing": 0.1,
                  "train_steps": 100_000, "steps_per_cycle": 1000, "mixed_precision": "auto"},
    },
    # Transformer big, the same paper, Table 3 row "big": d_model 1024, 16 heads, feed-forward
    # 4096, dropout 0.3 (their EN-DE value; EN-FR used 0.1), 300k steps; the same schedule, whose
    # peak at d_model 1024 is 1024^-0.5 * 4000^-0.5 = 4.94e-4 (rounded to 5e-4). About 209M
    # parameters with a 32k shared vocabulary.
    "transformer-big": {
        "model": {"kind": "transformer", "num_layers": 6, "d_model": 1024, "num_heads": 16,
                  "ff_dim": 4096, "dropout": 0.3, "attention_dropout": 0.0, "norm": "post"},
        "train": {"schedule": "warmup_inverse_sqrt", "peak_lr": 5e-4, "warmup_steps": 4000,
                  "scale_lr_with_workers": False, "label_smoothing": 0.1,
                  "train_steps": 300_000, "steps_per_cycle": 1000, "mixed_precision": "auto"},
    },
    # GNMT with 1,024-unit layers: 8 encoder layers (the bottom one bidirectional) and 8 decoder
    # layers, as in Wu et al. 2016 ("Google's Neural Machine Translation System", abstract and
    # section 3: residual connections from the third layer, attention fed from the bottom decoder
    # layer) and tensorflow/nmt's wmt16_gnmt_8_layer.json: 8 is the depth the GNMT paper
    # reports its results with, and the model here already follows its layout. Dropout 0.2 and
    # the schedule's shape come from that json: 340k steps, the rate held for the first half and
    # then halved 10 times ("luong10"), here step_decay with Adam at gnmt-small's 1e-3 in place
    # of its SGD at 1.0. Attention is luong, not GNMT's additive one: tf-nmt's bahdanau scores
    # hold a [batch, target, source, units] tensor, up to 1.7 GB for a 4,096-token batch of
    # 100-token pairs at 1,024 units. About 212M parameters with a 32k shared vocabulary.
    "gnmt-1024": {
        "model": {"kind": "gnmt", "num_layers": 8, "units": 1024, "attention": "luong",
                  "dropout": 0.2},
        "train": {"schedule": "step_decay", "peak_lr": 1e-3, "decay_start": 170_000,
                  "decay_every": 17_000, "decay_factor": 0.5, "scale_lr_with_workers": False,
                  "train_steps": 340_000, "steps_per_cycle": 1000, "mixed_precision": "auto"},
    },
}


# ``tf-nmt quickstart --precision``: time both and take the faster, or one of them.
QUICKSTART_PRECISIONS = ("auto", "float32", "bfloat16")

# The quickstart Transformer keeps an EMA of its weights (train.ema_decay) and scores and exports
# it at the last checkpoint. Two same-seed pilots on its 7,534-step budget (seeds 1234 and 4321,
# experiments/quickstart/results/ema_pilot.json): the EMA at 0.999 scored dev/test BLEU 9.76/9.83
# (mean of the seeds) against 9.03/9.73 for the last-5 average of the raw weights (the earlier
# default) and 8.58/9.00 for the last checkpoint alone; averaging the last 5 EMA weights on top
# scored 9.42/9.92, less on dev, so the EMA is used alone.
QUICKSTART_EMA_DECAY = 0.999
# ``tf-nmt quickstart --average-last``: it scores and exports the average of the last K
# checkpoints. The default: 1 (the last checkpoint alone) where the run keeps an EMA, else 5
# (gnmt-small, or train.ema_decay=0): on the 7,712-step 45-minute run of the raw weights the
# average of the last 5 (steps 6,000-7,712, 500 apart) scored dev BLEU 9.36 and test 9.54
# against 8.62 and 8.80 for the last checkpoint alone (experiments/quickstart/README.md).
QUICKSTART_AVERAGE_LAST = {"ema": 1, "raw": 5}
# `tf-nmt quickstart --minutes`: the training time budget; the whole job stays under about an
# hour on 2 cores.
QUICKSTART_MINUTES = 45.0


def preset(name: str) -> Config:
    """A named starting configuration (see :data:`PRESETS`). Its keys are recorded as given
    by ``preset``: they are the preset's recipe, so a user who changes the key that governs one
    of them (``train.schedule``, say) is not asked to drop a key only the preset wrote."""
    if name not in PRESETS:
        raise _unknown("preset", name, list(PRESETS))
    return config_from_dict(PRESETS[name], origin="preset")
