"""Every config key through every mode: used there, or refused there with a message naming it.

The refusals are driven by tf_nmt.config_usage.USAGE; the walk checks that each mode's own
validation refuses what the table marks unused and accepts what it marks used, and the static
checks below that the table agrees with the code that reads the keys.
"""
import dataclasses
import inspect
import re
from pathlib import Path

import pytest

from tf_nmt.config import COMM_MODES, PRESETS, Config, ConfigError, load_config, preset
from tf_nmt.config_usage import (BMUF_KEYS, GRADDROP_KEYS, MODES, SCHEDULE_KEYS, USAGE,
                                 WITHOUT_WARMUP, check_given, table_key, why_unused)

REPO = Path(__file__).resolve().parents[1]

# A valid value other than the default, for every key (model hyper-parameters: model.dropout).
VALUES = {
    "data.data_dir": "elsewhere", "data.vocab_size": 4000, "data.max_length": 50,
    "data.batch_tokens": 2048, "data.length_bucket_width": 0, "data.shuffle_seed": 7, "data.shuffle_buffer": 1000,
    "data.oversample": "{ding: 2}",
    "model.kind": "gnmt", "model.dropout": 0.2,
    "decode.beam_size": 2, "decode.length_penalty": 1.0, "decode.batch_size": 8,
    "train.train_steps": 1000, "train.steps_per_cycle": 100, "train.optimizer": "sgd",
    "train.beta_1": 0.8, "train.beta_2": 0.9, "train.epsilon": 1e-8, "train.clip_norm": 1.0,
    "train.schedule": "constant", "train.schedule_implementation": "op", "train.peak_lr": 5e-4,
    "train.warmup_steps": 100, "train.decay_start": 10, "train.decay_every": 10,
    "train.decay_factor": 0.7, "train.cooldown_fraction": 0.2, "train.label_smoothing": 0.2,
    "train.loss_kernel": "tf", "train.dropout_kernel": "tf", "train.norm_kernel": "tf",
    "train.keep_checkpoints": 3, "train.log_every": 10, "train.seed": 7,
    "train.divergence_factor": 3.0, "train.time_budget_minutes": 5.0,
    "train.scale_lr_with_workers": False, "train.backward_passes_per_step": 2,
    "train.elastic_commit_every": 10, "train.elastic_max_retries": 3,
    "train.quantize_bits": 4, "train.quantize_kind": "fixed",
    "train.quantize_scale": "max", "train.quantize_biases": True,
    "train.quantize_error_feedback": False, "train.quantize_activations_bits": 4,
    "train.quantize_activations_scale": 2.0, "train.mixed_precision": True,
    "train.jit_compile": True, "train.steps_per_execution": 2, "train.comm": "dense",
    "train.drop_ratio": 0.9, "train.drop_threshold": "per_tensor", "train.drop_warmup_steps": 10,
    "train.drop_warmup_shape": "geometric", "train.error_feedback": False,
    "train.local_gradients": True, "train.one_bit": True, "train.average_every": 10,
    "train.bmuf_block_momentum": 0.3, "train.bmuf_block_lr": 0.5, "train.bmuf_nesterov": False,
    "train.init_from": "parent-run", "train.init_embeddings": "exclude", "train.init_warmup": False,
    "train.ema_decay": 0.999,
}

# (mode, the overrides that put a configuration into it): train under every train.comm mode.
CONTEXTS = ([("train", [] if comm == "sparse_as_dense" else [f"train.comm={comm}"])
             for comm in COMM_MODES]
            + [("train-elastic", []), ("train-async", []), ("quickstart", [])])


def _all_keys():
    cfg = Config()
    return {f"{s}.{f.name}" for s in ("data", "model", "train", "decode")
            for f in dataclasses.fields(getattr(cfg, s))}


def _validate(mode, cfg):
    """The validation each mode runs before it reads data or writes a file."""
    from tf_nmt.training.async_trainer import check_async_config
    from tf_nmt.training.elastic import check_elastic_config
    from tf_nmt.training.trainer import validate_config

    if mode == "train-async":
        check_async_config(cfg.train)
        check_given(cfg, "train-async")
    elif mode == "train-elastic":
        validate_config(cfg, mode="train-elastic")
        check_elastic_config(cfg)
    elif mode == "quickstart":
        check_given(cfg, "quickstart")
        validate_config(cfg)
    else:
        validate_config(cfg)


def _config(mode, overrides, tmp_path):
    if mode == "quickstart":
        from tf_nmt.commands.quickstart import quickstart_config

        return quickstart_config(tmp_path / "data", 45.0, overrides)
    return load_config(None, overrides)


def test_every_key_is_classified_for_every_mode():
    keys = _all_keys()
    assert set(USAGE) == keys
    assert {table_key(k) for k in VALUES} == keys  # the walk sets every key
    defaults = Config()
    for dotted, value in VALUES.items():
        got = load_config(None, [f"{dotted}={value}"])
        section, name = dotted.split(".")
        if section == "model" and name != "kind":
            assert got.model.hparams[name] == value
        else:
            assert getattr(got, section) != getattr(defaults, section), dotted
        for mode in MODES:
            why = why_unused(got, dotted, mode)
            assert why is None or why.strip(), (dotted, mode)


@pytest.mark.parametrize("mode, base", CONTEXTS,
                         ids=[f"{m}-{'+'.join(b) or 'default'}" for m, b in CONTEXTS])
def test_every_key_is_used_or_refused_naming_it(mode, base, tmp_path):
    problems = []
    for dotted, value in VALUES.items():
        if mode == "quickstart" and dotted == "model.kind":
            continue  # the preset's hyper-parameters are the Transformer's: --preset gnmt-small
        cfg = _config(mode, base + [f"{dotted}={value}"], tmp_path)
        expected = why_unused(cfg, dotted, mode)
        try:
            _validate(mode, cfg)
            error = None
        except ConfigError as err:
            error = str(err)
        if expected is not None:  # (b) marked unused: refused, the message naming the key
            if error is None or dotted not in error:
                problems.append(f"{dotted}={value!r} is unused by {mode} ({expected}) but "
                                f"validation gave {error!r}")
        elif error is not None and ("ignored" in error or dotted not in error):
            # (c) marked used: accepted, or a combination refused by a message naming the key
            problems.append(f"{dotted}={value!r} is used by {mode} but refused: {error}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_key_is_used_by_its_own_configuration(name):
    cfg = preset(name)
    for dotted in cfg.given:
        assert why_unused(cfg, dotted, "train") is None, dotted


def test_preset_keys_lapse_with_the_schedule_the_user_replaces_but_user_keys_do_not():
    cfg = load_config(None, ["train.schedule=constant"], base=preset("quickstart"))
    check_given(cfg, "train")  # the preset's warmup_steps went with its schedule
    cfg = load_config(None, ["train.schedule=constant", "train.warmup_steps=300"],
                      base=preset("quickstart"))
    with pytest.raises(ConfigError, match=r"^train.warmup_steps=300 would be ignored: "
                                          r"train.schedule=constant does not use it"):
        check_given(cfg, "train")


def test_given_keys_are_recorded_and_neither_compared_nor_saved(tmp_path):
    cfg = load_config(None, ["train.peak_lr=0.002", "model.d_model=64"])
    assert cfg.given == {"train.peak_lr": "set", "model.d_model": "set"}
    assert cfg == load_config(None, ["train.peak_lr=0.002", "model.d_model=64"], origin="file")
    assert "given" not in cfg.to_dict()
    cfg.save(tmp_path / "c.yaml")
    from_file = load_config(tmp_path / "c.yaml")
    assert from_file.given["train.peak_lr"] == "file"
    # a saved config spells out every default: those keys give nothing, so a run's config.yaml
    # can start a new run under another schedule without its default decay_* keys refused
    assert "train.decay_start" not in from_file.given and "train.warmup_steps" not in from_file.given
    check_given(load_config(tmp_path / "c.yaml", ["train.schedule=step_decay"]), "train")
    assert load_config(None, [], base=cfg).given == cfg.given  # copied with the base


@pytest.mark.parametrize("overrides, message", [
    (["train.init_embeddings=exclude"], "train.init_embeddings='exclude' would be ignored: it "
                                        "applies only with train.init_from"),
    (["train.init_warmup=false"], "train.init_warmup=False would be ignored"),
    (["train.init_from=p", "train.schedule=step_decay", "train.init_warmup=false"],
     "train.schedule=step_decay has no warm-up to keep or drop"),
    (["train.init_from=p", "train.schedule=linear_warmup", "train.init_warmup=false",
      "train.warmup_steps=50"], r"with train.init_warmup=false it runs constant"),
    (["train.quantize_kind=fixed"], r"it applies only with train.quantize_bits > 0"),
    (["train.quantize_activations_scale=2.0"], r"train.quantize_activations_bits > 0"),
    (["train.optimizer=sgd", "train.beta_1=0.8"], r"train.optimizer=sgd has no such parameter"),
    (["train.decay_every=5"], r"train.schedule=warmup_inverse_sqrt does not use it"),
])
def test_refusal_messages(overrides, message):
    with pytest.raises(ConfigError, match=message):
        check_given(load_config(None, overrides), "train")


# ---- (d) the table against the code that reads the keys -------------------------------------

def test_schedule_keys_are_the_schedule_constructors_parameters():
    from tf_nmt.training import schedules

    for implementation, registry in schedules.SCHEDULES.items():
        for name, cls in registry.items():
            params = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
            assert tuple(params) == SCHEDULE_KEYS[name], (implementation, name)
    assert set(schedules.SCHEDULES["python"]) == set(SCHEDULE_KEYS)
    assert schedules.WITHOUT_WARMUP == WITHOUT_WARMUP
    assert set(schedules.schedule_params(Config().train, 1)) == {
        k for keys in SCHEDULE_KEYS.values() for k in keys}


def test_comm_keys_are_those_resolve_comm_reads_per_mode():
    from tf_nmt.distributed.comm import settings

    assert settings.GRADDROP_KEYS == GRADDROP_KEYS and settings.BMUF_KEYS == BMUF_KEYS
    for comm in COMM_MODES:
        for local in (False, True):
            if local and comm != "graddrop":
                continue
            extra = [f"train.comm={comm}"] + (["train.local_gradients=true"] if local else [])
            cfg = load_config(None, extra)
            used = {k for k in settings.MODE_KEYS if why_unused(cfg, f"train.{k}", "train") is None}
            assert used == set(settings.keys_used(comm, local)), (comm, local)


def _train_keys_read(source: str):
    return set(re.findall(r"\b(?:t|cfg\.train)\.(\w+)", source))


def test_train_async_reads_what_the_table_says_it_uses():
    from tf_nmt.training import async_trainer, runtime, schedules

    body = inspect.getsource(async_trainer.train_nmt_async)
    read = (_train_keys_read(body) | _train_keys_read(inspect.getsource(schedules.from_config))
            | {k for keys in SCHEDULE_KEYS.values() for k in keys}
            | {f"{name}_kernel" for name in runtime.KERNEL_NAMES})  # runtime.resolve_kernels(t)
    fields = {f.name for f in dataclasses.fields(Config().train)}
    marked = {k for k in fields if "train-async" in USAGE[f"train.{k}"].modes}
    # every key marked used is read there (or by the schedule it builds)
    assert marked <= read, sorted(marked - read)
    # and the trainer calls the one-process schedule (scale_lr_with_workers is a no-op there)
    assert "world_size=1" in body


def test_every_train_key_is_read_somewhere_in_the_library():
    sources = "\n".join(p.read_text() for p in (REPO / "tf_nmt").rglob("*.py")
                        if p.name not in ("config.py", "config_usage.py"))
    for f in dataclasses.fields(Config().train):
        assert re.search(rf"\.{f.name}\b", sources), f.name
