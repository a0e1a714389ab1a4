"""The step benchmark (`python -m experiments step-speed`): shapes, ratios, argument checks, the op-type
profile of a real TF-profiler trace, and one tiny end-to-end run of fp32 against XLA."""
import json

import pytest

from experiments import STUDIES
from experiments.step_speed import study as bench
from experiments.step_speed import op_profile

TINY = ["--set", "model.num_layers=1", "--set", "model.d_model=32", "--set", "model.num_heads=2",
        "--set", "model.ff_dim=64", "--vocab-size", "320"]


def test_registered_as_a_study():
    assert STUDIES["step-speed"] == "experiments.step_speed.study"


def test_shapes_parse_and_bad_ones_are_refused():
    assert bench.parse_shapes("128x32, 64X64") == [(128, 32), (64, 64)]
    for bad in ("128", "0x32", "axb", "8x8,8x8"):
        with pytest.raises(ValueError):
            bench.parse_shapes(bad)


def test_ratios_are_medians_of_per_round_ratios():
    samples = {"4x10": {"fp32": [2.0, 1.0, 2.0], "bf16": [1.0, 1.0, 2.5]}}
    summary = bench.summarise(samples, [(4, 10)], "fp32")
    row = summary["4x10"]["bf16"]
    assert row["x_baseline"] == pytest.approx(1.0)  # ratios 2.0, 1.0, 0.8
    assert row["s_per_step"] == 1.0 and row["tgt_tok_per_s"] == pytest.approx(40.0)
    assert "| 4x10 | bf16 | 1.000 | 40 | 1.00 |" in bench.format_table(summary, "fp32")


@pytest.mark.parametrize("argv, message", [
    (["--variants", "fp32,fp64"], "unknown variant"),
    (["--variants", "fp32,fp32"], "twice"),
    (["--shapes", "12"], "SENTENCESxTOKENS"),
    (["--steps", "0"], "--steps"),
    (["--profile-steps", "5"], "only with --profile"),
])
def test_bad_arguments_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(argv)
    assert message in capsys.readouterr().err


def test_a_real_trace_is_summed_by_op_type_with_the_matmuls_found():
    import tensorflow as tf

    a = tf.random.uniform([256, 256])

    @tf.function
    def step():
        return tf.reduce_sum(tf.nn.relu(tf.matmul(a, a)))

    step()
    traced = op_profile.trace(step, steps=3)
    ops = traced["op_s_per_step"]
    assert any(k in op_profile.MATMUL_TYPES for k in ops), ops
    summary = op_profile.summarise_ops(ops, top=2)
    assert 0 < summary["matmul_share"] <= 1 and len(summary["top"]) == 2
    assert summary["top"][0]["s_per_step"] >= summary["top"][1]["s_per_step"] > 0
    with pytest.raises(ValueError):
        op_profile.trace(step, steps=0)


def test_tiny_end_to_end_run_writes_speeds_and_profiles(tmp_path):
    out = tmp_path / "step.json"
    argv = [*TINY, "--variants", "fp32,fp32-xla", "--shapes", "8x8,4x16", "--rounds", "2",
            "--steps", "2", "--profile", "--profile-steps", "2", "--out", str(out)]
    assert bench.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["baseline"] == "fp32" and result["command"].startswith("python -m experiments step-speed")
    for shape, tokens in (("8x8", 64), ("4x16", 64)):
        rows = result["shapes"][shape]
        assert rows["fp32"]["x_baseline"] == pytest.approx(1.0)
        for row in rows.values():
            assert len(row["rounds_s_per_step"]) == 2 and row["s_per_step"] > 0
            assert row["tgt_tok_per_s"] == pytest.approx(tokens / row["s_per_step"])
    fp32, xla = result["profiles"]["fp32"], result["profiles"]["fp32-xla"]
    assert fp32["matmul_share"] > 0 and fp32["top"][0]["op"] != op_profile.XLA_OP
    assert xla["top"][0]["op"] == op_profile.XLA_OP
    with pytest.raises(SystemExit, match="exists"):
        bench.main(argv)
