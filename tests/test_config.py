"""Config loading: defaults, presets, files, overrides, and clear errors for typos."""
import json

import pytest

from tf_nmt.config import ConfigError, load_config, preset


def test_overrides_and_types(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  peak_lr: 0.002\n  train_steps: 10\nmodel:\n  kind: gnmt\n  units: 64\n")
    cfg = load_config(path, ["train.train_steps=20", "data.batch_tokens=1024", "train.mixed_precision=true"])
    assert cfg.train.peak_lr == 0.002 and cfg.train.train_steps == 20
    assert cfg.data.batch_tokens == 1024 and cfg.train.mixed_precision is True
    assert cfg.model.kind == "gnmt" and cfg.model.hparams == {"units": 64}


def test_json_config_and_preset(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"decode": {"beam_size": 2}}))
    cfg = load_config(path, base=preset("quickstart"))
    assert cfg.decode.beam_size == 2 and cfg.model.hparams["d_model"] == 256


@pytest.mark.parametrize("override,message", [
    ("train.peak_rl=1", "did you mean 'peak_lr'"),
    ("trian.peak_lr=1", "unknown config section 'trian'"),
    ("train.train_steps=many", "expected int"),
    ("train.mixed_precision=maybe", "unknown precision 'maybe'.*auto"),
    ("train.jit_compile=maybe", "expected bool"),
    ("train.sparse_as_dense=false", "retired: .*train.comm=sparse_as_dense .* train.comm=dense"),
    ("train.sparse_as_dense=true", "retired"),
    ("peak_lr=1", "section.key=value"),
])
def test_bad_keys_and_values_are_clear_errors(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_saved_configs_with_the_retired_default_still_load(tmp_path):
    """Older runs saved every key, ``sparse_as_dense: true`` included: their config.yaml loads
    (the key is dropped); the non-default value, which meant train.comm=dense, is refused."""
    old = tmp_path / "config.yaml"
    old.write_text("train:\n  sparse_as_dense: true\n  comm: sparse_as_dense\n  train_steps: 7\n")
    cfg = load_config(old)
    assert cfg.train.comm == "sparse_as_dense" and cfg.train.train_steps == 7
    assert not hasattr(cfg.train, "sparse_as_dense") and "sparse_as_dense" not in cfg.to_dict()["train"]
    old.write_text("train:\n  sparse_as_dense: false\n")
    with pytest.raises(ConfigError, match="retired.*train.comm=dense"):
        load_config(old)


def test_bad_files_are_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [1, 2")
    with pytest.raises(ConfigError, match="cannot parse"):
        load_config(bad)
    with pytest.raises(ConfigError, match="unknown preset"):
        preset("quickstrat")


def test_round_trip_through_saved_yaml(tmp_path):
    cfg = load_config(None, ["train.peak_lr=0.5"], base=preset("gnmt-small"))
    cfg.save(tmp_path / "config.yaml")
    again = load_config(tmp_path / "config.yaml")
    assert again == cfg
