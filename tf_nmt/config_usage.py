"""Which config keys each mode uses: the one table behind "an option that would be ignored is an
error".

:data:`USAGE` classifies every key of every section (``model.NAME`` hyper-parameters as
``model.hparams``) for every mode of :data:`MODES` that takes a user's configuration:

* ``train``: ``tf-nmt train`` (one process or under horovodrun, any ``train.comm``);
* ``train-elastic``: ``tf-nmt train --elastic``;
* ``train-async``: ``tf-nmt train-async``;
* ``quickstart``: ``tf-nmt quickstart`` (it trains as ``train`` does, then evaluates and exports
  with the run's ``decode.*``).

``evaluate``, ``translate`` and ``export`` take no configuration: they read the run's saved
``config.yaml`` (its ``model.*``, ``decode.*`` and ``train.quantize_activations_*``).

A key is used by a mode when the mode is in its :attr:`Usage.modes` and its condition
(:attr:`Usage.unused`) finds nothing; otherwise :func:`check_given` refuses it when it was given
(``Config.given``: a config file, ``--set`` or a flag; a preset's keys are its recipe and are not
refused when the user changes the key that governs them). The schedule and communication
columns restate what :mod:`tf_nmt.training.schedules` and :mod:`tf_nmt.distributed.comm` read;
tests/test_config_usage.py checks the restatement against them.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Dict, FrozenSet, List, Optional, Tuple

from tf_nmt.config import Config, ConfigError
from tf_nmt.modes import (BMUF_KEYS, GRADDROP_KEYS, HOROVOD_MODES, SCHEDULE_KEYS, WITHOUT_WARMUP,
                          averages_parameters, averaging_modes_text)

MODES: Tuple[str, ...] = ("train", "train-elastic", "train-async", "quickstart")
MODE_LABELS = {"train": "tf-nmt train", "train-elastic": "tf-nmt train --elastic",
               "train-async": "tf-nmt train-async", "quickstart": "tf-nmt quickstart"}
SYNC = frozenset({"train", "train-elastic", "quickstart"})
ALL = frozenset(MODES)

# Each schedule's keys, each comm mode's keys and what it supports: tf_nmt.modes.
# The train.* keys only `tf-nmt train --elastic` reads (tf_nmt.training.elastic).
ELASTIC_KEYS = ("elastic_commit_every", "elastic_max_retries")

Condition = Callable[[Config], Optional[str]]


@dataclass(frozen=True)
class Usage:
    """Where a key is read: the modes that read it at all (``off``: why the others do not), and
    within them an optional condition returning why this configuration ignores it (None: used)."""

    modes: FrozenSet[str] = ALL
    off: str = ""
    unused: Optional[Condition] = None


def effective_schedule(cfg: Config) -> str:
    """The schedule a run builds: ``train.schedule``, or its warm-up-free form for a transfer
    child with ``train.init_warmup=false``."""
    t = cfg.train
    if t.init_from and not t.init_warmup:
        return WITHOUT_WARMUP.get(t.schedule, t.schedule)
    return t.schedule


def _schedule_takes(key: str) -> Condition:
    def unused(cfg: Config) -> Optional[str]:
        name = effective_schedule(cfg)
        if name not in SCHEDULE_KEYS or key in SCHEDULE_KEYS[name]:
            return None  # an unknown schedule is refused by the schedule registry
        ran = "" if name == cfg.train.schedule else f" (with train.init_warmup=false it runs {name})"
        users = [s for s, keys in SCHEDULE_KEYS.items() if key in keys]
        return (f"train.schedule={cfg.train.schedule}{ran} does not use it (it applies to "
                f"{', '.join(users)})")
    return unused


def _comm_uses(modes: Tuple[str, ...], what: str) -> Condition:
    def unused(cfg: Config) -> Optional[str]:
        return None if cfg.train.comm in modes else f"train.comm={cfg.train.comm} ignores it ({what})"
    return unused


def _averages(cfg: Config) -> Optional[str]:
    t = cfg.train
    if averages_parameters(t.comm, t.local_gradients):
        return None
    return (f"train.comm={t.comm} does not average parameters (it applies to "
            f"{averaging_modes_text()})")


def _needs(key: str, on: Callable[[Config], bool], why: str) -> Condition:
    def unused(cfg: Config) -> Optional[str]:
        return None if on(cfg) else f"it applies only with train.{key} ({why})"
    return unused


def _init_warmup(cfg: Config) -> Optional[str]:
    if not cfg.train.init_from:
        return "it applies only with train.init_from (a transfer-learning child)"
    if cfg.train.schedule not in WITHOUT_WARMUP:
        return (f"train.schedule={cfg.train.schedule} has no warm-up to keep or drop (it applies "
                f"to {', '.join(WITHOUT_WARMUP)})")
    return None


def _adam(cfg: Config) -> Optional[str]:
    return None if cfg.train.optimizer == "adam" else \
        f"train.optimizer={cfg.train.optimizer} has no such parameter (Adam's)"


_QUANT = _needs("quantize_bits > 0", lambda c: c.train.quantize_bits > 0, "re-training under "
                "weight quantisation is off at 0")
_ACT = _needs("quantize_activations_bits > 0", lambda c: c.train.quantize_activations_bits > 0,
              "activation quantisation is off at 0")
_TRANSFER = _needs("init_from", lambda c: bool(c.train.init_from), "a transfer-learning child")
_GRADDROP = _comm_uses(("graddrop",), "it applies to train.comm=graddrop")
_BMUF = _comm_uses(("bmuf",), "it applies to train.comm=bmuf")

_ASYNC_OFF = {  # why train-async ignores a key (tf_nmt.training.async_trainer)
    "steps_per_cycle": "it has no evaluation cycles: one checkpoint, at the end",
    "optimizer": "it trains with Adam (train.beta_1/beta_2/epsilon)",
    "schedule_implementation": "the schedule runs on the parameter server in Python",
    "scale_lr_with_workers": "each server update applies one worker's push: the one-process "
                             "schedule, unscaled",
    "keep_checkpoints": "it saves one checkpoint, at the end",
    "log_every": "it logs the server's counters every --progress-every seconds",
    "divergence_factor": "it has no divergence check",
    "time_budget_minutes": "it runs train.train_steps updates; there is no time budget",
    "backward_passes_per_step": "workers accumulate locally with --n-push",
    **{key: "it is not elastic" for key in ELASTIC_KEYS},
    "quantize_bits": "it does not re-train under quantisation",
    "quantize_kind": "it does not re-train under quantisation",
    "quantize_scale": "it does not re-train under quantisation",
    "quantize_biases": "it does not re-train under quantisation",
    "quantize_error_feedback": "it does not re-train under quantisation",
    "quantize_activations_bits": "it does not quantise matmul inputs",
    "quantize_activations_scale": "it does not quantise matmul inputs",
    "mixed_precision": "it trains in float32",
    "jit_compile": "its workers' steps are traced by the parameter-server strategy, not compiled "
                   "with XLA",
    "steps_per_execution": "a worker pushes after each step (several: --n-push)",
    "comm": "gradients go to the parameter server, not through Horovod",
    "init_from": "it starts from a fresh initialisation",
    "init_embeddings": "it starts from a fresh initialisation",
    "init_warmup": "it starts from a fresh initialisation",
    **{key: "gradients go to the parameter server, not through Horovod"
       for key in GRADDROP_KEYS + BMUF_KEYS + ("average_every",)},
}

# The conditions of train.* keys within the modes that read them.
_TRAIN_CONDITIONS: Dict[str, Condition] = {
    "beta_1": _adam, "beta_2": _adam, "epsilon": _adam,
    "schedule_implementation": None,
    "peak_lr": _schedule_takes("peak_lr"),
    "warmup_steps": _schedule_takes("warmup_steps"),
    "decay_start": _schedule_takes("decay_start"),
    "decay_every": _schedule_takes("decay_every"),
    "decay_factor": _schedule_takes("decay_factor"),
    "backward_passes_per_step": _comm_uses(HOROVOD_MODES, "it accumulates in Horovod's "
                                           "optimizer: train.comm=dense or sparse_as_dense"),
    "quantize_kind": _QUANT, "quantize_scale": _QUANT, "quantize_biases": _QUANT,
    "quantize_error_feedback": _QUANT,
    "quantize_activations_scale": _ACT,
    **{key: _GRADDROP for key in GRADDROP_KEYS},
    "average_every": _averages,
    **{key: _BMUF for key in BMUF_KEYS},
    "init_embeddings": _TRANSFER,
    "init_warmup": _init_warmup,
    "ema_decay": _comm_uses(HOROVOD_MODES, "weight EMA follows the weights all ranks share: "
                            "train.comm=dense or sparse_as_dense"),
}


def _build_usage() -> Dict[str, Usage]:
    usage: Dict[str, Usage] = {}
    defaults = Config()
    for section in ("data", "model", "decode"):
        # data.* feed every trainer; model.* build the model; decode.* are saved with the run
        # for its evaluate/translate/export (the quickstart's included).
        for f in dataclasses.fields(getattr(defaults, section)):
            usage[f"{section}.{f.name}"] = Usage()
    # train-async's workers shuffle unseeded, each in its own order (one seed on every worker
    # would give them all the same batches; tf_nmt.training.async_trainer)
    usage["data.shuffle_seed"] = Usage(SYNC, "each worker shuffles in its own, unseeded order")
    for f in dataclasses.fields(defaults.train):
        key = f.name
        modes = SYNC if key in _ASYNC_OFF else ALL
        off = _ASYNC_OFF.get(key, "")
        if key == "ema_decay":
            modes, off = frozenset({"train", "quickstart"}), (
                "weight EMA is kept by tf-nmt train and quickstart only (elastic resets would not "
                "roll it back, train-async has no per-step callbacks)")
        if key in ELASTIC_KEYS:
            modes, off = frozenset({"train-elastic"}), (
                "it is used only by elastic training (tf-nmt train --elastic under horovodrun "
                "--min-np/--max-np)")
        usage[f"train.{key}"] = Usage(modes, off, _TRAIN_CONDITIONS.get(key))
    return usage


#: "section.key" -> :class:`Usage`, for every key of every section.
USAGE: Dict[str, Usage] = _build_usage()


def table_key(dotted: str) -> str:
    """The :data:`USAGE` entry of a given key (``model.NAME`` hyper-parameters: ``model.hparams``)."""
    section, _, name = dotted.partition(".")
    if section == "model" and dotted not in USAGE:
        return "model.hparams"
    return dotted


def why_unused(cfg: Config, dotted: str, mode: str) -> Optional[str]:
    """Why ``mode`` would ignore key ``dotted`` of ``cfg`` (None: it uses it)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use one of {MODES}")
    usage = USAGE[table_key(dotted)]
    if mode not in usage.modes:
        return f"{MODE_LABELS[mode]} does not use it ({usage.off})"
    return usage.unused(cfg) if usage.unused is not None else None


def value_of(cfg: Config, dotted: str):
    section, _, name = dotted.partition(".")
    obj = getattr(cfg, section)
    if section == "model" and not hasattr(obj, name):
        return obj.hparams.get(name)
    return getattr(obj, name)


def unused_given(cfg: Config, mode: str) -> List[Tuple[str, str]]:
    """(key, why) of every key the user gave (not a preset) that ``mode`` would ignore."""
    out = []
    for dotted in cfg.given_by_user():
        why = why_unused(cfg, dotted, mode)
        if why is not None:
            out.append((dotted, why))
    return out


def check_given(cfg: Config, mode: str) -> None:
    """ConfigError naming the first key the user gave that ``mode`` would ignore, and why."""
    unused = unused_given(cfg, mode)
    if unused:
        dotted, why = unused[0]
        raise ConfigError(f"{dotted}={value_of(cfg, dotted)!r} would be ignored: {why}; "
                          "remove it")
