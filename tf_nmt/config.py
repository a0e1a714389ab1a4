"""Run configuration: typed sections, loaded from YAML/JSON and ``--set section.key=value``.

Unknown sections or keys are errors (with a "did you mean" hint): a typo must never silently
fall back to a default in a 30-minute training run.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml

from tf_nmt.errors import UserError
from tf_nmt.utils.io import write_text_atomic


class ConfigError(UserError, ValueError):
    """An invalid configuration: unknown key, wrong type or bad value."""


# The gradient-communication modes ``train.comm`` accepts (tf_nmt.distributed.comm): Horovod with
# IndexedSlices densified and allreduced (sparse_as_dense) or allgathered (dense), gradient
# dropping (graddrop), model averaging (fedavg) and blockwise model-update filtering (bmuf).
COMM_MODES = ("dense", "sparse_as_dense", "graddrop", "fedavg", "bmuf")
HOROVOD_MODES = ("dense", "sparse_as_dense")  # averaged by Horovod's DistributedOptimizer

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
    data_dir: str = "data_cache"
    vocab_size: int = 8000
    max_length: int = 100
    batch_tokens: int = 4096
    length_bucket_width: int = 1
    shuffle_seed: int = 1234
    # Repeat the train pairs of a source K times ({source: K}, sources as in train.meta.tsv,
    # e.g. {ding: 3}): up-weights a domain (tf_nmt.data.weighting). Empty: every pair once.
    oversample: Dict[str, int] = field(default_factory=dict)


@dataclass
class ModelConfig:
    kind: str = "transformer"
    hparams: Dict[str, Any] = field(default_factory=dict)


@dataclass
class TrainConfig:
    train_steps: int = 2000
    steps_per_cycle: int = 250
    optimizer: str = "adam"
    beta_1: float = 0.9
    beta_2: float = 0.98
    epsilon: float = 1e-9
    clip_norm: float = 0.0
    schedule: str = "warmup_inverse_sqrt"
    schedule_implementation: str = "python"
    peak_lr: float = 1e-3
    warmup_steps: int = 400
    decay_start: int = 0
    decay_every: int = 1000
    decay_factor: float = 0.5
    # Linear fall of the rate to 0 over the last fraction of the run (steps or time budget,
    # whichever is further along); 0 = off. See tf_nmt.training.schedules.Cooldown.
    cooldown_fraction: float = 0.0
    label_smoothing: float = 0.1
    # The loss's kernel (tf_nmt.models.losses.resolve_loss_kernel): "fused" is the C++ op, one
    # pass over the [B*T, V] logits each way; "tf" composes TensorFlow's sparse cross-entropy;
    # "auto" takes fused on a CPU-only machine with AVX-512F and the custom-op library, else tf.
    loss_kernel: str = "auto"
    # The dropout layers' kernel (tf_nmt.models.dropout.resolve_dropout_kernel): "fused" is the
    # C++ seeded dropout op (mask regenerated from a seed, one pass each way); "tf" is Keras's
    # dropout; "auto" takes fused where loss_kernel's auto would. Used by `tf-nmt train`.
    dropout_kernel: str = "auto"
    # The layer norms' kernel (tf_nmt.models.layer_norm.resolve_norm_kernel): "fused" is the C++
    # op, one pass over each row forward and one backward; "tf" is Keras's LayerNormalization
    # (unfused at epsilon 1e-6); "auto" takes fused where loss_kernel's auto would.
    norm_kernel: str = "auto"
    keep_checkpoints: int = 5
    log_every: int = 50
    seed: int = 1234
    divergence_factor: float = 4.0
    time_budget_minutes: float = 0.0
    scale_lr_with_workers: bool = True
    backward_passes_per_step: int = 1
    # `tf-nmt train --elastic` (tf_nmt.training.elastic): commit the in-memory state every K steps;
    # a lost worker costs at most the steps since the last commit.
    elastic_commit_every: int = 50
    # Re-training under quantisation (tf_nmt.quantization.retrain): 0 = off, else B in 1..8 bits;
    # after every update the matrices (and with quantize_biases the vectors) are re-quantised.
    quantize_bits: int = 0
    quantize_kind: str = "log"  # log | fixed
    quantize_scale: str = "optimised"  # unscaled | max | optimised
    quantize_biases: bool = False
    quantize_error_feedback: bool = True
    # Log-quantised matmul inputs (tf_nmt.quantization.activations; thesis Table 7.4): 0 = off,
    # else B in 1..8 bits (4 in the thesis). Every activation entering a matmul with a weight
    # matrix becomes +-S * 2^-k, k < 2^(B-1), straight-through gradient; evaluate, translate and
    # export apply the same. S is FIXED (no per-product fit): a constant, e.g. 1.0 for inputs
    # that are layer-normalised or LSTM states, or calibrated once on a trained model with
    # activations.calibrate_scale (the optimised log scale of its recorded matmul inputs) and
    # then frozen here. Use with quantize_bits=4 (re-trained 4-bit weights).
    quantize_activations_bits: int = 0
    quantize_activations_scale: float = 1.0
    # bfloat16 activations/matmuls with float32 variables (Keras "mixed_bfloat16"): ~2.5x faster
    # matmuls on CPUs with AMX/AVX512-BF16; checkpoints stay float32.
    mixed_precision: bool = False
    # Compile the train step with XLA (Keras jit_compile). One process, stock ops only: Horovod's
    # collectives and this package's custom ops have no XLA kernels. Every new batch shape
    # compiles once (the token buckets bound how many there are).
    jit_compile: bool = False
    # Training steps per call of the compiled train function (Keras steps_per_execution): the
    # steps of a call run in one graph loop, with no Python and no host sync between them, and
    # the per-step callbacks run once per call. One process and comm dense or sparse_as_dense
    # only (the other modes act between steps); it must divide steps_per_cycle, log_every and
    # train_steps (tf_nmt.training.trainer.check_steps_per_execution).
    steps_per_execution: int = 1
    # Gradient communication, one of COMM_MODES (tf_nmt.distributed.comm); graddrop, fedavg and
    # bmuf use the keys below.
    comm: str = "sparse_as_dense"
    drop_ratio: float = 0.99
    drop_threshold: str = "global"  # global | per_tensor
    drop_warmup_steps: int = 1000  # drop ratio ramps up to drop_ratio over these steps
    # linear: R rises linearly (most of the gradient is still sent for much of the warm-up);
    # geometric: the kept fraction 1 - R falls geometrically from 1 (Deep Gradient Compression's
    # exponential warm-up), which sends far less during the warm-up.
    drop_warmup_shape: str = "linear"
    error_feedback: bool = True
    local_gradients: bool = False  # apply G - S + L, average parameters every average_every
    one_bit: bool = False  # 1-bit quantise the kept values (sent as sign bits + column means)
    average_every: int = 500  # P: parameter averaging period (graddrop local, fedavg, bmuf)
    bmuf_block_momentum: float = 0.5
    bmuf_block_lr: float = 1.0
    bmuf_nesterov: bool = True
    # Transfer learning (tf_nmt.training.transfer): a parent run dir or checkpoint prefix whose
    # weights initialise a fresh run; how embedding rows are mapped; keep the LR warm-up or not.
    init_from: str = ""
    init_embeddings: str = "token-match"
    init_warmup: bool = True


@dataclass
class DecodeConfig:
    beam_size: int = 4
    length_penalty: float = 0.6
    batch_size: int = 64


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    def save(self, path: Path) -> None:
        """Write the resolved config as YAML, atomically."""
        write_text_atomic(Path(path), yaml.safe_dump(self.to_dict(), sort_keys=False))


_SECTION_TYPES = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig, "decode": DecodeConfig}


def _unknown(kind: str, name: str, valid: List[str]) -> ConfigError:
    hint = difflib.get_close_matches(name, valid, n=1)
    extra = f"; did you mean {hint[0]!r}?" if hint else ""
    return ConfigError(f"unknown {kind} {name!r}{extra} (valid: {', '.join(sorted(valid))})")


def _coerce(section: str, key: str, value: Any, target: Any) -> Any:
    """Convert ``value`` to the type of the field default ``target`` (bool/int/float/str/dict)."""
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
                     from_file: bool = True) -> Config:
    """Merge ``raw`` ({section: {key: value}}) into ``base`` (default: defaults), validating keys.

    ``from_file``: ``raw`` was read from a saved config, so a retired key holding the value older
    runs saved (see :data:`RETIRED_KEYS`) is dropped instead of refused.
    """
    cfg = _copy(base or Config())
    if not isinstance(raw, dict):
        raise ConfigError(f"a config must be a mapping of sections, got {type(raw).__name__}")
    for section, values in raw.items():
        if section not in _SECTION_TYPES:
            raise _unknown("config section", section, list(_SECTION_TYPES))
        if not isinstance(values, dict):
            raise ConfigError(f"config section {section!r} must be a mapping")
        obj = getattr(cfg, section)
        names = [f.name for f in dataclasses.fields(obj)]
        for key, value in values.items():
            if section == "model" and key not in names:
                obj.hparams[key] = value  # model hyper-parameters are validated by build_model
                continue
            if key not in names:
                if _retired(section, key, value, from_file):
                    continue
                raise _unknown(f"key in [{section}]", key, names)
            setattr(obj, key, _coerce(section, key, value, getattr(obj, key)))
    return cfg


def _copy(cfg: Config) -> Config:
    return Config(
        data=dataclasses.replace(cfg.data, oversample=dict(cfg.data.oversample)),
        model=ModelConfig(kind=cfg.model.kind, hparams=dict(cfg.model.hparams)),
        train=dataclasses.replace(cfg.train),
        decode=dataclasses.replace(cfg.decode),
    )


def load_config(path: Optional[Path] = None, overrides: Optional[List[str]] = None,
                base: Optional[Config] = None) -> Config:
    """Defaults ← ``path`` (YAML or JSON) ← ``overrides`` (``section.key=value`` strings)."""
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
        cfg = config_from_dict(raw or {}, cfg)
    for item in overrides or []:
        if "=" not in item or "." not in item.split("=", 1)[0]:
            raise ConfigError(f"override must look like section.key=value, got {item!r}")
        dotted, value = item.split("=", 1)
        section, key = dotted.split(".", 1)
        cfg = config_from_dict({section: {key: _parse_scalar(value)}}, cfg, from_file=False)
    return cfg


PRESETS: Dict[str, Dict[str, Any]] = {
    # A Transformer small enough to train to a useful BLEU on 2 CPU cores in ~45 minutes.
    "quickstart": {
        "model": {"kind": "transformer", "num_layers": 3, "d_model": 256, "num_heads": 4,
                  "ff_dim": 1024, "dropout": 0.1},
        # peak_lr 2e-3 / warm-up 300 (was 1e-3 / 400): dev loss 5.68/4.93/4.62 vs 6.12/5.19/4.82
        # at steps 250/500/750 in a same-seed pilot on the real corpus (pre-norm tolerates it).
        "train": {"peak_lr": 2e-3, "warmup_steps": 300, "steps_per_cycle": 250,
                  "mixed_precision": True},
    },
    "gnmt-small": {
        "model": {"kind": "gnmt", "num_layers": 2, "units": 256, "attention": "luong",
                  "dropout": 0.1},
        "train": {"schedule": "step_decay", "peak_lr": 1e-3, "decay_start": 2000,
                  "decay_every": 500, "steps_per_cycle": 250},
    },
}


# ``tf-nmt quickstart --precision``: time both and take the faster, or one of them.
QUICKSTART_PRECISIONS = ("auto", "float32", "bfloat16")

# ``tf-nmt quickstart --average-last``: it scores and exports the average of the last K
# checkpoints. On the 7,712-step 45-minute run (2,048-token batches) the dev loss flattened after
# ~5,500 steps, and the average of the last 5 (steps 6,000-7,712, 500 apart) scored dev BLEU
# 9.36 and test 9.54 against 8.62 and 8.80 for the last checkpoint alone (README "Averaging the
# last checkpoints pays at 7,700 steps").
QUICKSTART_AVERAGE_LAST = 5
# `tf-nmt quickstart --minutes`: the training time budget; the whole job stays under about an
# hour on 2 cores.
QUICKSTART_MINUTES = 45.0


def preset(name: str) -> Config:
    """A named starting configuration (see :data:`PRESETS`)."""
    if name not in PRESETS:
        raise _unknown("preset", name, list(PRESETS))
    return config_from_dict(PRESETS[name])
