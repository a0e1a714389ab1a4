"""The quantisation study's pure logic: which cells get a re-training run, the re-training
overrides, packing moves and the tables (no training here)."""
import numpy as np
import pytest

from tf_nmt.quantization.policy import QuantPolicy
from tf_nmt.studies import quantization as exp

CELLS = [QuantPolicy(bits=4), QuantPolicy(bits=4, scale="max"), QuantPolicy(bits=4, quantize_biases=True),
         QuantPolicy(bits=2), QuantPolicy(bits=4, kind="fixed")]


def retrains(argv, policy, scratch=False):
    return exp.retrains(exp.parse_args(argv), policy, scratch)


def test_scope_all_retrains_every_cell_and_trains_from_scratch():
    assert exp.parse_args([]).retrain_scope == "all"
    assert all(retrains([], policy) for policy in CELLS)
    assert retrains([], QuantPolicy(bits=4), scratch=True)


def test_scope_main_fine_tunes_only_the_deployed_policy():
    argv = ["--retrain-scope", "main"]
    assert [retrains(argv, policy) for policy in CELLS] == [True, False, False, False, False]
    assert not retrains(argv, QuantPolicy(bits=4), scratch=True)


def test_no_retrain_steps_means_no_fine_tuning_in_any_scope():
    for scope in ("all", "main"):
        assert not retrains(["--retrain-steps", "0", "--retrain-scope", scope], QuantPolicy(bits=4))


def test_retrain_overrides_are_a_valid_config_with_the_policy():
    from tf_nmt.config import load_config

    policy = QuantPolicy(bits=3, kind="fixed", scale="max", quantize_biases=True)
    t = load_config(overrides=exp.retrain_overrides(policy, feedback=False)).train
    assert (t.quantize_bits, t.quantize_kind, t.quantize_scale) == (3, "fixed", "max")
    assert t.quantize_biases is True and t.quantize_error_feedback is False


def test_packing_moves_counts_changed_weights_relative_to_the_largest():
    original = [np.array([1.0, -4.0, 2.0]), np.zeros([0])]
    packed = [np.array([1.0, -4.0, 1.0]), np.zeros([0])]
    assert exp.packing_moves(original, packed) == {"moved_by_packing": 1, "max_relative_move": 0.25}
    assert exp.packing_moves(original, original)["moved_by_packing"] == 0


def test_tables_show_every_section():
    cell = {"bleu": 7.0, "delta_bleu": -0.5, "packed_bytes": 2e6, "size_ratio": 7.5}
    res = {"fp32": {"bleu": 7.5}, "thesis_delta_bleu_4bit_retrained": -0.19,
           "scaling": [{"scale": "max", "biases": "fp32", "no_retrain": cell}],
           "bit_sweep": [{"bits": 4, "no_retrain": cell, "retrained": cell}],
           "fixed_vs_log": [{"kind": "log", "no_retrain": cell}],
           "start_x_feedback": [{"start": "fine-tune", "error_feedback": True, **cell}]}
    text = exp.tables({"models": {"transformer": res}})
    assert "## transformer: fp32 BLEU 7.50" in text
    assert "| max | fp32 | 7.00 (-0.50) | - |" in text
    assert "| 4 | 2.00 | 7.50x | 7.00 (-0.50) | 7.00 (-0.50) |" in text
    assert "| fine-tune | on | 7.00 (-0.50) |" in text


def test_tiny_needs_the_toy_corpus(tmp_path):
    with pytest.raises(SystemExit, match="toy corpus"):
        exp.main(["--tiny", "--results", str(tmp_path / "q.json"), "--work-dir", str(tmp_path)])
