"""The training-speed benchmark (`python -m experiments train-speed`): speed read from progress logs and
from OpenNMT-tf's log, ratios per round, argument checks, and one tiny end-to-end run of two
tf-nmt variants alternating (the OpenNMT-tf peer needs its side virtualenv: skipped without)."""
import json
import os

import pytest
import yaml

from tests.helpers import write_toy_data_dir
from experiments import STUDIES
from experiments.train_speed import onmt_peer
from experiments.train_speed import study as bench

ONMT_LOG = """\
2026-11-23 21:57:26.253000: I runner.py:310] Number of model parameters: 7586624
2026-11-23 21:57:37.000000: I runner.py:310] Step = 5 ; steps/s = 0.40, tokens/s = 2914 (1406 source, 1508 target) ; Learning rate = 0.000040 ; Loss = 8.956205
2026-11-23 21:57:47.000000: I runner.py:310] Step = 10 ; steps/s = 0.50, tokens/s = 3038 (1461 source, 1600 target) ; Learning rate = 0.000073 ; Loss = 8.749959
2026-11-23 21:57:55.000000: I runner.py:310] Step = 15 ; steps/s = 0.62, tokens/s = 3432 (1650 source, 2000 target) ; Learning rate = 0.000107 ; Loss = 8.681559
"""
TINY = ["model.num_layers=1", "model.d_model=32", "model.num_heads=2", "model.ff_dim=64",
        "data.vocab_size=320"]


def test_registered_as_a_study():
    assert STUDIES["train-speed"] == "experiments.train_speed.study"


def test_onmt_log_gives_step_times_from_timestamps_and_target_tokens():
    entries = onmt_peer.read_log(ONMT_LOG)
    assert entries == [{"step": 10, "tokens_per_s": 1600.0, "s_per_step": 2.0},
                       {"step": 15, "tokens_per_s": 2000.0, "s_per_step": 1.6}]
    assert onmt_peer.parameter_count(ONMT_LOG) == {"parameters": 7586624}
    with pytest.raises(ValueError, match="fewer than two"):
        onmt_peer.read_log(ONMT_LOG.splitlines()[1])


def test_steady_speed_counts_only_the_steps_after_the_warm_up():
    entries = [{"step": 5, "tokens_per_s": 100.0, "s_per_step": 9.0},
               {"step": 10, "tokens_per_s": 1600.0, "s_per_step": 2.0},
               {"step": 15, "tokens_per_s": 2000.0, "s_per_step": 1.6}]
    speed = bench.steady_speed(entries, warmup=5, log_every=5)
    # 5 steps at 2.0 s with 1600 tok/s, 5 at 1.6 s with 2000 tok/s: 32,000 tokens in 18 s
    assert speed["timed_steps"] == 10 and speed["s_per_step"] == pytest.approx(1.8)
    assert speed["tgt_tok_per_s"] == pytest.approx(32000 / 18)
    with pytest.raises(ValueError, match="warm-up"):
        bench.steady_speed(entries, warmup=15, log_every=5)
    assert "train_cores_busy" not in speed  # the peer's log has no CPU time


def test_steady_cores_busy_counts_the_timed_steps_only():
    entries = [{"step": 5, "tokens_per_s": 100.0, "s_per_step": 9.0, "elapsed_s": 45.0, "cpu_s": 50.0},
               {"step": 10, "tokens_per_s": 1600.0, "s_per_step": 2.0, "elapsed_s": 55.0, "cpu_s": 69.0},
               {"step": 15, "tokens_per_s": 2000.0, "s_per_step": 1.6, "elapsed_s": 63.0, "cpu_s": 84.2}]
    speed = bench.steady_speed(entries, warmup=5, log_every=5)
    assert speed["train_cores_busy"] == pytest.approx((84.2 - 50.0) / (63.0 - 45.0))  # 1.9


def test_ratios_are_medians_of_per_round_ratios():
    def rounds(*tok):
        return [{"tgt_tok_per_s": t, "s_per_step": 1.0, "cores_busy": 1.5, "train_cores_busy": 1.9}
                for t in tok]

    summary = bench.summarise({"fp32": rounds(100, 200, 100), "bf16": rounds(150, 260, 160),
                               "onmt-fp32": rounds(125, 250, 125)})
    assert summary["bf16"]["x_fp32"] == pytest.approx(1.5)  # 1.5, 1.3, 1.6
    assert summary["fp32"]["x_onmt_fp32"] == pytest.approx(0.8)
    assert summary["bf16"]["tgt_tok_per_s"] == 160
    assert "| bf16 | 160 | 1.000 | 1.50 / 1.90 | 1.50 | 1.20 | - |" in bench.format_table(summary)
    summary["bf16"].pop("train_cores_busy")
    assert "| bf16 | 160 | 1.000 | 1.50 / - | 1.50 | 1.20 | - |" in bench.format_table(summary)


def test_keras3_variants_are_also_compared_with_their_keras2_twin_round_by_round():
    def rounds(*tok):
        return [{"tgt_tok_per_s": t, "s_per_step": 1.0, "cores_busy": 1.5} for t in tok]

    summary = bench.summarise({"fp32": rounds(100, 200, 100), "k3-fp32": rounds(90, 210, 99),
                               "bf16": rounds(150, 260, 160), "k3-bf16": rounds(120, 260, 170)})
    assert summary["k3-fp32"]["x_keras2"] == pytest.approx(0.99)  # 0.90, 1.05, 0.99
    assert summary["k3-bf16"]["x_keras2"] == pytest.approx(1.0)  # 0.80, 1.00, 1.0625
    assert "x_keras2" not in summary["bf16"] and "x_keras2" not in summary["fp32"]
    assert bench.format_table(summary).splitlines()[-1].endswith("| - | 1.00 |")


def test_the_twin_of_a_keras3_variant_runs_on_keras2():
    # tf-nmt's default is Keras 3: an unpinned twin would compare Keras 3 with itself
    args = bench.parse_args(["--variants", "fp32,k3-fp32,bf16", "--variant",
                             "dense:train.mixed_precision=false np=2", "--variant",
                             "k3-dense:train.mixed_precision=false env.TF_NMT_KERAS=3 np=2"])
    assert args.table["fp32"].env == {"TF_NMT_KERAS": "2"}
    assert args.table["dense"].env == {"TF_NMT_KERAS": "2"} and args.table["dense"].processes == 2
    assert args.table["k3-fp32"].env == {"TF_NMT_KERAS": "3"}
    assert args.table["bf16"].env == {}  # no Keras 3 twin: the default Keras
    assert bench.VARIANTS["fp32"].env == {}  # the registry itself is left alone


def test_ema_variants_are_compared_with_their_twin_without_ema_round_by_round():
    def rounds(*tok):
        return [{"tgt_tok_per_s": t, "s_per_step": 1.0, "cores_busy": 1.5} for t in tok]

    summary = bench.summarise({"bf16": rounds(100, 200, 100), "bf16-ema": rounds(95, 180, 99)})
    assert summary["bf16-ema"]["x_no_ema"] == pytest.approx(0.95)  # 0.95, 0.90, 0.99
    assert "x_no_ema" not in summary["bf16"] and "x_keras2" not in summary["bf16-ema"]
    assert bench.format_table(summary).splitlines()[-1].endswith("| - | 0.95 |")
    assert "train.ema_decay=0.999" in bench.VARIANTS["bf16-ema"].overrides


def test_auto_is_compared_with_the_faster_precision_of_each_round():
    def rounds(*tok):
        return [{"tgt_tok_per_s": t, "s_per_step": 1.0, "cores_busy": 1.5} for t in tok]

    summary = bench.summarise({"fp32": rounds(100, 200, 100), "bf16": rounds(150, 160, 90),
                               "auto": rounds(147, 200, 100)})
    assert summary["auto"]["x_faster_precision"] == pytest.approx(1.0)  # 0.98, 1.0, 1.0
    assert "x_faster_precision" not in summary["bf16"]
    assert bench.format_table(summary).endswith("round by round: 1.00x")
    assert "x_faster_precision" not in bench.summarise({"auto": rounds(1, 2, 3)})["auto"]
    assert bench.VARIANTS["auto"].overrides == ["train.mixed_precision=auto"]


@pytest.mark.parametrize("argv, message", [
    (["--variants", "fp32,fp64"], "unknown variant"),
    (["--variants", "fp32", "--warmup", "7"], "multiples of --log-every"),
    (["--variants", "onmt-fp32", "--onmt-venv", "/nonexistent"], "install_opennmt.sh"),
    (["--variants", "fp32", "--variant", "w1"], "expected NAME:SETTINGS"),
    (["--variants", "fp32", "--variant", "w1:data.length_bucket_width"], "is not KEY=VALUE"),
    (["--variants", "fp32", "--variant", "fp32:data.length_bucket_width=1"], "must be new"),
    (["--variants", "fp32", "--variant", "a:x=1", "--variant", "a:x=2"], "must be new"),
    (["--variants", "fp32", "--variant", "h:np=two"], "np must be a whole number"),
    (["--variants", "fp32", "--variant", "h:np=0"], "np must be a whole number"),
])
def test_bad_arguments_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(argv)
    assert message in capsys.readouterr().err


def test_a_variant_can_run_several_processes():
    name, variant = bench.parse_variant("h4:np=4 train.mixed_precision=false env.HOROVOD_CYCLE_TIME=10")
    assert name == "h4" and variant.processes == 4
    assert list(variant.overrides) == ["train.mixed_precision=false"]
    assert dict(variant.env) == {"HOROVOD_CYCLE_TIME": "10"}
    assert bench.parse_variant("one:train.mixed_precision=true")[1].processes == 1


def test_jit_compile_refuses_custom_ops():
    from tf_nmt.config import ConfigError, load_config
    from tf_nmt.training.trainer import validate_config

    for extra in (["train.quantize_bits=4"], ["train.comm=graddrop"],
                  ["train.schedule_implementation=op"]):
        with pytest.raises(ConfigError, match="train.jit_compile cannot compile"):
            validate_config(load_config(None, ["train.jit_compile=true", *extra]))
    validate_config(load_config(None, ["train.jit_compile=true"]))


@pytest.mark.slow
def test_tiny_benchmark_end_to_end(tmp_path):
    data = write_toy_data_dir(tmp_path / "data")
    out = tmp_path / "speed.json"
    argv = ["--data-dir", str(data), "--variants", "fp32,fp32-xla", "--rounds", "2",
            "--warmup", "4", "--steps", "4", "--log-every", "2", "--batch-tokens", "256",
            "--work-dir", str(tmp_path / "work"), "--out", str(out),
            "--variant", "w3:train.mixed_precision=false data.length_bucket_width=3 env.TF_NMT_X=1"]
    for item in TINY:
        argv += ["--set", item]
    assert bench.main(argv) == 0
    result = json.loads(out.read_text())
    variants = result["variants"]
    assert list(variants) == ["fp32", "fp32-xla", "w3"] and variants["fp32"]["x_fp32"] == 1.0
    assert result["command"].startswith("python -m experiments train-speed --data-dir ")
    assert result["variant_settings"]["w3"]["env"] == {"TF_NMT_X": "1"}
    for row in variants.values():
        assert len(row["rounds"]) == 2 and row["tgt_tok_per_s"] > 0 and row["cores_busy"] > 0
        assert 0 < row["train_cores_busy"] <= (os.cpu_count() or 2) + 0.1
        assert all(r["timed_steps"] == 4 for r in row["rounds"])
    from tf_nmt.config import load_config

    for name, xla, width in (("fp32", False, 1), ("fp32-xla", True, 1), ("w3", False, 3)):
        cfg = load_config(str(tmp_path / "work" / f"{name}-r1" / "config.yaml"))
        assert cfg.train.jit_compile is xla and cfg.train.mixed_precision is False
        assert cfg.data.length_bucket_width == width
    assert 0 < result["padding"]["target_real_fraction"] <= 1
    with pytest.raises(SystemExit, match="exists"):  # never overwritten silently
        bench.main(argv)


def test_the_peer_mirrors_the_study_overrides_or_refuses_them():
    from experiments.lib.common import study_config

    cfg = study_config("quickstart", ["model.num_layers=2", "model.attention_dropout=0.1"], 4096)
    assert onmt_peer.mismatches(cfg) == []
    text = onmt_peer.model_file(cfg)
    assert "num_layers=(2, 2)" in text and "attention_dropout=0.1" in text
    assert "num_units=256" in text and "pre_norm=True" in text and "output_layer_bias=True" in text
    base = study_config("transformer-base", [], 4096)      # post-norm: mirrored, not refused
    assert onmt_peer.mismatches(base) == []
    text = onmt_peer.model_file(base)
    assert "num_layers=(6, 6)" in text and "num_units=512" in text and "pre_norm=False" in text
    assert "ffn_inner_dim=2048" in text and "num_heads=8" in text
    untied = study_config("quickstart", ["model.tie_embeddings=false", "train.clip_norm=1.0"], 4096)
    assert [m.split("=")[0] for m in onmt_peer.mismatches(untied)] == ["model.tie_embeddings",
                                                                      "train.clip_norm"]
    assert onmt_peer.mismatches(study_config("gnmt-small", [], 4096))[0].startswith("model.kind")


def test_peer_variants_with_overrides_it_cannot_mirror_are_refused(tmp_path, capsys):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "onmt-main").write_text("")
    common = ["--onmt-venv", str(venv), "--variants", "fp32,onmt-fp32"]
    assert bench.parse_args(common + ["--set", "model.num_layers=2"]).variants == ["fp32", "onmt-fp32"]
    with pytest.raises(SystemExit):
        bench.parse_args(common + ["--set", "model.tie_embeddings=false"])
    assert "cannot mirror model.tie_embeddings=False" in capsys.readouterr().err
    assert bench.parse_args(["--variants", "fp32", "--set",
                             "model.tie_embeddings=false"]).variants == ["fp32"]


def test_prepare_writes_the_overridden_model_and_optimizer_for_the_peer(tmp_path):
    from tf_nmt.data.data_dir import ensure_vocab

    data = write_toy_data_dir(tmp_path / "data")
    ensure_vocab(data, 320)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    build_vocab = venv / "bin" / "onmt-build-vocab"  # stands in for OpenNMT-tf's: copies the pieces
    build_vocab.write_text('#!/bin/sh\nwhile [ "$1" != "--save_vocab" ]; do shift; done\n'
                           'cut -f1 "$(dirname "$2")/spm.vocab" > "$2"\n')
    build_vocab.chmod(0o755)
    out = onmt_peer.prepare(data, "quickstart", tmp_path / "onmt", venv,
                            TINY + ["model.num_decoder_layers=2", "train.beta_2=0.997"])
    model = (out / "model.py").read_text()
    assert "num_layers=(1, 2)" in model and "num_units=32" in model and "ffn_inner_dim=64" in model
    config = yaml.safe_load((out / "config.yml").read_text())  # as OpenNMT-tf reads it
    assert config["params"]["optimizer_params"] == {"beta_1": 0.9, "beta_2": 0.997,
                                                    "epsilon": 1e-9}
    assert isinstance(config["params"]["learning_rate"], float)
    assert [onmt_peer.yaml_float(x) for x in (1e-9, 5e-05, 0.002, 3.0, 1e20)] == [
        "1.0e-09", "5.0e-05", "0.002", "3.0", "1.0e+20"]
    pieces = (out / "vocab.txt").read_text().splitlines()
    assert pieces[0] == "<unk>" and "</s>" not in pieces and len(pieces) > 300
    with pytest.raises(ValueError, match="cannot mirror model.tie_embeddings=False"):
        onmt_peer.prepare(data, "quickstart", tmp_path / "onmt2", venv, ["model.tie_embeddings=false"])
    assert not (tmp_path / "onmt2").exists()
