"""train.comm and the graddrop/fedavg/bmuf keys: resolution, compatibility and bad values."""
import pytest

from tf_nmt.config import COMM_MODES, ConfigError, load_config
from tf_nmt.distributed.comm import resolve_comm


def settings(*overrides):
    return resolve_comm(load_config(overrides=list(overrides)).train)


def test_default_is_sparse_as_dense():
    s = settings()
    assert s.mode == "sparse_as_dense"
    assert s.average_every == 500 and s.drop_warmup_steps == 1000 and not s.averages_parameters


@pytest.mark.parametrize("value", ["false", "true"])
def test_retired_sparse_as_dense_key_names_the_replacement(value):
    with pytest.raises(ConfigError, match="train.sparse_as_dense was retired.*train.comm=dense"):
        settings(f"train.sparse_as_dense={value}")


@pytest.mark.parametrize("mode", COMM_MODES)
def test_every_mode_resolves(mode):
    assert settings(f"train.comm={mode}").mode == mode


def test_graddrop_options():
    s = settings("train.comm=graddrop", "train.drop_ratio=0.9", "train.drop_threshold=per_tensor",
                 "train.error_feedback=false", "train.local_gradients=true", "train.one_bit=true",
                 "train.average_every=7", "train.drop_warmup_steps=0")
    assert (s.drop_ratio, s.per_tensor, s.error_feedback, s.local_gradients, s.one_bit,
            s.average_every, s.drop_warmup_steps) == (0.9, True, False, True, True, 7, 0)
    assert s.averages_parameters
    assert settings("train.comm=fedavg").averages_parameters
    assert settings("train.comm=bmuf").averages_parameters


@pytest.mark.parametrize("override, message", [
    ("train.comm=allreduce", "unknown mode"),
    ("train.drop_ratio=1.0", "drop_ratio"),
    ("train.drop_ratio=-0.1", "drop_ratio"),
    ("train.drop_threshold=local", "drop_threshold"),
    ("train.average_every=0", "average_every"),
    ("train.drop_warmup_steps=-1", "drop_warmup_steps"),
    ("train.drop_warmup_shape=cosine", "drop_warmup_shape"),
    ("train.bmuf_block_momentum=1.0", "bmuf_block_momentum"),
    ("train.bmuf_block_lr=0", "bmuf_block_lr"),
])
def test_bad_values_are_clear_errors(override, message):
    with pytest.raises(ConfigError, match=message):
        settings(override)


def test_local_modes_refuse_gradient_accumulation():
    with pytest.raises(ConfigError, match="backward_passes_per_step"):
        settings("train.comm=fedavg", "train.backward_passes_per_step=2")


def test_cli_comm_option_sets_the_key():
    from tf_nmt.cli import build_parser

    args = build_parser().parse_args(["train", "--run-dir", "r", "--comm", "graddrop"])
    assert args.comm == "graddrop"
    for mode in COMM_MODES:  # the CLI offers exactly the package's mode names
        assert build_parser().parse_args(["train", "--run-dir", "r", "--comm", mode]).comm == mode
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--run-dir", "r", "--comm", "topk"])


@pytest.mark.parametrize("overrides, option, mode", [
    (["train.local_gradients=true"], "train.local_gradients", "train.comm=sparse_as_dense"),
    (["train.comm=dense", "train.one_bit=true"], "train.one_bit", "train.comm=dense"),
    (["train.comm=fedavg", "train.error_feedback=false"], "train.error_feedback", "train.comm=fedavg"),
    (["train.comm=bmuf", "train.drop_ratio=0.9"], "train.drop_ratio", "train.comm=bmuf"),
    (["train.drop_threshold=per_tensor"], "train.drop_threshold", "train.comm=sparse_as_dense"),
    (["train.comm=fedavg", "train.drop_warmup_steps=0"], "train.drop_warmup_steps", "train.comm=fedavg"),
    (["train.drop_warmup_shape=geometric"], "train.drop_warmup_shape", "train.comm=sparse_as_dense"),
    (["train.comm=fedavg", "train.bmuf_block_momentum=0.9"], "train.bmuf_block_momentum",
     "train.comm=fedavg"),
    (["train.comm=graddrop", "train.bmuf_block_lr=2"], "train.bmuf_block_lr", "train.comm=graddrop"),
    (["train.bmuf_nesterov=false"], "train.bmuf_nesterov", "train.comm=sparse_as_dense"),
    (["train.average_every=100"], "train.average_every", "train.comm=sparse_as_dense"),
    (["train.comm=graddrop", "train.average_every=100"], "train.average_every",
     "train.comm=graddrop without train.local_gradients"),
])
def test_a_key_the_mode_would_ignore_is_refused_naming_key_and_mode(overrides, option, mode):
    with pytest.raises(ConfigError, match=f"{option}=.* is ignored by {mode}"):
        settings(*overrides)


@pytest.mark.parametrize("overrides", [
    ["train.comm=graddrop", "train.local_gradients=true", "train.average_every=10"],
    ["train.comm=fedavg", "train.average_every=10"],
    ["train.comm=bmuf", "train.average_every=10", "train.bmuf_block_lr=2", "train.bmuf_nesterov=false"],
    ["train.comm=sparse_as_dense", "train.drop_ratio=0.99", "train.average_every=500"],  # defaults
])
def test_keys_the_mode_reads_and_defaults_elsewhere_are_accepted(overrides):
    settings(*overrides)
