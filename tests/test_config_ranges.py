"""Every numeric and enumerated config key declares its valid values beside its field
(``metadata={"range": Range(...)}`` / ``{"choices": Choices(...)}``), and a value outside them is
a one-line ConfigError naming the key, the value and what is valid, whichever way the config is
given (--set, a config file, a preset); the CLI prints it as one ``tf-nmt: error:`` line."""
import dataclasses
import math

import pytest

from tf_nmt import config
from tf_nmt.config import Choices, ConfigError, Range, load_config

SECTIONS = {"data": config.DataConfig, "model": config.ModelConfig, "train": config.TrainConfig,
            "decode": config.DecodeConfig}
# String keys that are free text (paths), not one of a fixed set of values.
FREE_TEXT = {"data.data_dir", "train.init_from"}


def _fields():
    for section, section_type in SECTIONS.items():
        for spec in dataclasses.fields(section_type):
            yield f"{section}.{spec.name}", spec


def _default(spec):
    return spec.default if spec.default is not dataclasses.MISSING else spec.default_factory()


RANGED = [(dotted, spec) for dotted, spec in _fields() if "range" in spec.metadata]
ENUMERATED = [(dotted, spec) for dotted, spec in _fields() if "choices" in spec.metadata]


def test_every_numeric_key_declares_a_range_and_every_enumerated_key_its_choices():
    missing = []
    for dotted, spec in _fields():
        value = _default(spec)
        numeric = (isinstance(value, (int, float)) and not isinstance(value, bool)
                   or spec.type == "Dict[str, int]")
        if numeric and not isinstance(spec.metadata.get("range"), Range):
            missing.append(f"{dotted} (no Range)")
        if isinstance(value, str) and dotted not in FREE_TEXT:
            if not isinstance(spec.metadata.get("choices"), Choices):
                missing.append(f"{dotted} (no Choices)")
            elif value not in spec.metadata["choices"].values:
                missing.append(f"{dotted} (default {value!r} not among its choices)")
        if "range" in spec.metadata and not numeric:
            missing.append(f"{dotted} (a range on a key that is not numeric)")
        elif "range" in spec.metadata and not all(
                v in spec.metadata["range"] for v in (value.values() if isinstance(value, dict)
                                                      else [value])):
            missing.append(f"{dotted} (default {value!r} out of its range)")
    assert not missing, ("declare each key's valid values beside its field in tf_nmt/config.py: "
                         + ", ".join(missing))
    assert len(RANGED) >= 40 and len(ENUMERATED) >= 12  # the walk below sees them all


def _outside(valid: Range, integer: bool):
    """Values just outside ``valid`` (and non-finite ones for a float key)."""
    step = 1 if integer else 0.5
    values = []
    if valid.lo is not None:
        below = valid.lo if valid.lo_open else valid.lo - step
        if below == valid.off:
            below = valid.off - step
        values.append(below)
    if valid.hi is not None:
        values.append(valid.hi if valid.hi_open else valid.hi + step)
    if not integer:
        values += [math.nan, math.inf, -math.inf]
    return values


def _inside(valid: Range, integer: bool):
    """The edges of ``valid`` that it includes, and its ``off`` value."""
    values = [] if valid.off is None else [valid.off]
    if valid.lo is not None:
        values.append(valid.lo + (1 if integer else 1e-6) * valid.lo_open)
    if valid.hi is not None:
        values.append(valid.hi - (1 if integer else 1e-6) * valid.hi_open)
    return values


def _as_set(dotted, spec, number):
    text = repr(number) if isinstance(number, int) or math.isfinite(number) else str(number)
    mapping = spec is not None and isinstance(_default(spec), dict)
    return f"{dotted}={{x: {text}}}" if mapping else f"{dotted}={text}"


def _refused(override):
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    return str(info.value)


@pytest.mark.parametrize("dotted, spec", RANGED, ids=[d for d, _ in RANGED])
def test_a_value_out_of_range_is_one_line_naming_key_value_and_range(dotted, spec):
    valid = spec.metadata["range"]
    integer = isinstance(_default(spec), (int, dict))
    for number in _outside(valid, integer):
        message = _refused(_as_set(dotted, spec, number))
        assert "\n" not in message
        assert f"{dotted}" in message and "is out of range" in message, message
        assert f"(valid: {valid})" in message, message
    for number in _inside(valid, integer):  # the edges it includes are accepted
        cfg = load_config(None, [_as_set(dotted, spec, number)])
        section, key = dotted.split(".")
        value = getattr(getattr(cfg, section), key)
        assert (value["x"] if isinstance(value, dict) else value) == pytest.approx(number)


# Values in use that a range must keep: each "0 = off", the edges the code accepts, and what the
# presets, experiments/ and tests set (an own corpus may bring a small SentencePiece model of its
# own, e.g. 60 pieces, whose size the run's config.yaml records).
IN_USE = ["train.ema_decay=0", "train.ema_decay=0.999", "train.divergence_factor=0",
          "train.divergence_factor=1", "train.quantize_bits=0", "train.quantize_bits=8",
          "train.quantize_activations_bits=0", "train.quantize_activations_bits=4",
          "train.clip_norm=0", "train.time_budget_minutes=0", "train.cooldown_fraction=0",
          "train.cooldown_fraction=1", "data.length_bucket_width=0", "train.drop_warmup_steps=0",
          "train.decay_start=0", "train.decay_factor=1", "decode.length_penalty=0",
          "train.drop_ratio=0", "train.drop_ratio=0.999", "train.bmuf_block_momentum=0",
          "train.peak_lr=1e30", "data.vocab_size=60", "data.batch_tokens=2", "data.max_length=1",
          "train.seed=0", "train.seed=4294967295", "data.shuffle_seed=0", "decode.beam_size=1",
          "train.label_smoothing=0", "train.beta_2=0.999", "train.epsilon=1e-3",
          "train.warmup_steps=1", "train.steps_per_cycle=1", "train.train_steps=1",
          "train.keep_checkpoints=1", "train.log_every=1", "train.average_every=1",
          "train.bmuf_block_lr=2", "train.quantize_activations_scale=0.03"]


@pytest.mark.parametrize("override", IN_USE)
def test_values_in_use_are_accepted(override):
    load_config(None, [override])


def test_range_text():
    assert str(Range(0, 1, hi_open=True)) == "[0, 1)"
    assert str(Range(0, lo_open=True)) == "> 0"
    assert str(Range(1, 8, off=0)) == "0 (off) or [1, 8]"
    assert 0 in Range(1, off=0) and 0.5 not in Range(1, off=0) and 1 in Range(1, off=0)
    assert math.inf not in Range(0) and math.nan not in Range()


def test_a_mapping_key_checks_each_value():
    assert "data.oversample['ding2']=1.5 is out of range (valid: an integer >= 1)" in _refused(
        "data.oversample={ding: 3, ding2: 1.5}")
    assert load_config(None, ["data.oversample={ding: 3}"]).data.oversample == {"ding": 3}


HPARAMS = sorted(config.MODEL_HPARAMS.items())


def test_every_numeric_or_enumerated_model_hyper_parameter_declares_its_values():
    from tf_nmt.models import MODEL_DEFAULTS

    names = {n: v for defaults in MODEL_DEFAULTS.values() for n, v in defaults.items()}
    undeclared = sorted(n for n, v in names.items()
                        if not isinstance(v, bool) and n not in config.MODEL_HPARAMS)
    assert not undeclared, f"add these to tf_nmt.config.MODEL_HPARAMS: {undeclared}"
    assert set(config.MODEL_HPARAMS) <= set(names)
    for kind, defaults in MODEL_DEFAULTS.items():  # the defaults are valid
        load_config(None, [f"model.kind={kind}"] + [f"model.{n}={'null' if v is None else v}"
                                                    for n, v in defaults.items()])


@pytest.mark.parametrize("name, valid", HPARAMS, ids=[n for n, _ in HPARAMS])
def test_a_model_hyper_parameter_out_of_range_is_one_line_naming_it(name, valid):
    dotted = f"model.{name}"
    if isinstance(valid, Choices):
        assert _refused(f"{dotted}=bogus").startswith(f"{dotted}: unknown {valid.what} 'bogus'")
        for value in valid.values:
            assert load_config(None, [f"{dotted}={value}"]).model.hparams[name] == value
        return
    outside = _outside(valid, valid.integer) + (["2.5", "abc", "true"] if valid.integer else [])
    for number in outside:
        text = number if isinstance(number, str) else _as_set(dotted, None, number).split("=")[1]
        message = _refused(f"{dotted}={text}")
        assert message.startswith(f"{dotted}=") and f"is out of range (valid: {valid})" in message
        assert "\n" not in message
    inside = _inside(valid, valid.integer) + ([None] if valid.null else [])
    for number in inside:
        text = "null" if number is None else str(number)
        assert load_config(None, [f"{dotted}={text}"]).model.hparams[name] == number
    # In a config file as a saved run's config.yaml holds them (model.hparams) too.
    with pytest.raises(ConfigError, match=f"model.{name}="):
        config.config_from_dict({"model": {"hparams": {name: outside[0]}}})


@pytest.mark.parametrize("dotted, spec", ENUMERATED, ids=[d for d, _ in ENUMERATED])
def test_an_unknown_value_of_an_enumerated_key_names_key_and_choices(dotted, spec):
    choices = spec.metadata["choices"]
    message = _refused(f"{dotted}=bogus")
    assert message.startswith(f"{dotted}: unknown {choices.what} 'bogus'") and "\n" not in message
    assert f"(valid: {', '.join(sorted(choices.shown()))})" in message
    section, key = dotted.split(".")
    for value, written in zip(choices.values, choices.shown()):
        assert getattr(getattr(load_config(None, [f"{dotted}={written}"]), section), key) == value


def test_a_config_file_and_a_preset_are_checked_too(tmp_path, monkeypatch):
    path = tmp_path / "run.yaml"
    path.write_text("train:\n  label_smoothing: 2\n")
    with pytest.raises(ConfigError, match=r"train.label_smoothing=2.0 is out of range \(valid: "
                                          r"\[0, 1\)\)"):
        load_config(path)
    for name in config.PRESETS:  # the shipped presets are in range
        config.preset(name)
    monkeypatch.setitem(config.PRESETS, "bad", {"train": {"peak_lr": -1}})
    with pytest.raises(ConfigError, match=r"train.peak_lr=-1.0 is out of range \(valid: > 0\)"):
        config.preset("bad")


def test_choices_match_what_the_package_implements():
    from tf_nmt.distributed.comm.settings import WARMUP_SHAPES
    from tf_nmt.models import MODEL_CLASSES
    from tf_nmt.models.kernels import KERNEL_SETTINGS
    from tf_nmt.quantization.codec import KINDS
    from tf_nmt.quantization.policy import SCALE_MODES
    from tf_nmt.training.schedules import SCHEDULES
    from tf_nmt.training.transfer import STRATEGIES

    def choices(dotted):
        section, key = dotted.split(".")
        spec = {f.name: f for f in dataclasses.fields(SECTIONS[section])}[key]
        return set(spec.metadata["choices"].values)

    assert choices("model.kind") == set(MODEL_CLASSES)
    for kernel in ("loss_kernel", "dropout_kernel", "norm_kernel"):
        assert choices(f"train.{kernel}") == set(KERNEL_SETTINGS)
    assert choices("train.quantize_kind") == set(KINDS)
    assert choices("train.quantize_scale") == set(SCALE_MODES)
    assert choices("train.drop_warmup_shape") == set(WARMUP_SHAPES)
    assert choices("train.comm") == set(config.COMM_MODES)
    assert choices("train.init_embeddings") == set(STRATEGIES)
    assert choices("train.schedule_implementation") == set(SCHEDULES)
    assert choices("train.schedule") == set().union(*SCHEDULES.values())


@pytest.mark.parametrize("override, expected", [
    ("train.label_smoothing=2", "train.label_smoothing=2.0 is out of range (valid: [0, 1))"),
    ("train.peak_lr=-1", "train.peak_lr=-1.0 is out of range (valid: > 0)"),
])
def test_the_cli_refuses_in_one_line_with_exit_status_2(tmp_path, capsys, override, expected):
    from tf_nmt import cli

    run_dir = tmp_path / "run"
    status = cli.main(["train", "--run-dir", str(run_dir), "--preset", "quickstart",
                       "--set", override])
    err = capsys.readouterr().err
    assert status == 2
    assert err.splitlines() == [f"tf-nmt: error: {expected}"]
    assert not run_dir.exists()
