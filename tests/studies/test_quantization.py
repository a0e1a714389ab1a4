"""The quantisation study's pure logic: which cells get a re-training run, the re-training
overrides, packing moves and the tables (no training here)."""
import numpy as np
import pytest

from tf_nmt.quantization.policy import QuantPolicy
from experiments.quantization import study as exp

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


def test_baseline_run_options_are_checked():
    args = exp.parse_args(["--models", "gnmt", "--baseline-run", "gnmt=runs/q"])
    assert args.baseline_runs == {"gnmt": "runs/q"} and args.baseline_steps == 6000
    for argv, message in [
            (["--baseline-run", "gnmt"], "KIND=DIR"),
            (["--models", "gnmt", "--baseline-run", "transformer=r"], "not in --models"),
            (["--models", "gnmt", "--baseline-run", "gnmt=a", "--baseline-run", "gnmt=b"], "twice")]:
        with pytest.raises(SystemExit, match=message):
            exp.parse_args(argv)
    # steps of a baseline that is not trained, and nothing trained from scratch: an error
    with pytest.raises(SystemExit):
        exp.parse_args(["--models", "gnmt", "--baseline-run", "gnmt=r", "--baseline-steps", "9",
                        "--retrain-scope", "main"])
    assert exp.parse_args(["--models", "gnmt", "--baseline-run", "gnmt=r", "--baseline-steps",
                           "9"]).baseline_steps == 9  # scope all: the from-scratch runs use it
    with pytest.raises(SystemExit):
        exp.parse_args(["--update", "--overwrite"])


def test_update_keeps_the_other_models_and_gives_each_its_record(tmp_path):
    import json

    path = tmp_path / "q.json"
    path.write_text(json.dumps({"command": "old", "machine": {"cpu": "x"}, "minutes": 69,
                                "models": {"transformer": {"fp32": {"bleu": 7.1}},
                                           "gnmt": {"fp32": {"bleu": 1.0}}}}))
    kept = exp.kept_results(path, True, ["gnmt"])
    assert kept == {"models": {"transformer": {"fp32": {"bleu": 7.1}, "command": "old",
                                               "machine": {"cpu": "x"}, "minutes": 69}}}
    assert exp.kept_results(path, False, ["gnmt"]) == {"models": {}}
    with pytest.raises(SystemExit, match="does not exist"):
        exp.kept_results(tmp_path / "none.json", True, ["gnmt"])


@pytest.mark.slow
def test_a_trained_run_as_baseline_and_update_end_to_end(tmp_path):
    """--tiny GNMT with a trained run as its baseline (--baseline-run): nothing is trained for
    the baseline, the fine-tunes start from it, and --update adds the entry to a results file
    and keeps the other model's. A baseline of another shape is refused before any training."""
    import json

    from tests.helpers import write_toy_data_dir

    results = tmp_path / "q.json"
    common = ["--tiny", "--models", "gnmt", "--retrain-scope", "main", "--bits", "4",
              "--results", str(results)]
    args = exp.parse_args(common + ["--work-dir", str(tmp_path / "w1")])
    args.data_dir, args.cycle = str(write_toy_data_dir(tmp_path / "toy")), 10
    baseline = exp.Experiment("gnmt", args).run("fp32", 30)  # a run trained elsewhere
    other = {"fp32": {"bleu": 7.0}, "thesis_delta_bleu_4bit_retrained": -0.19, "scaling": [],
             "bit_sweep": [], "fixed_vs_log": [], "start_x_feedback": []}
    results.write_text(json.dumps({"models": {"transformer": other}, "command": "older"}))
    with pytest.raises(SystemExit, match="the study's model is gnmt"):
        exp.main(common + ["--work-dir", str(tmp_path / "w0"), "--update", "--set",
                           "model.units=48", "--baseline-run", f"gnmt={baseline}"],
                 toy_data=write_toy_data_dir)
    assert not (tmp_path / "w0" / "gnmt").exists()
    assert exp.main(common + ["--work-dir", str(tmp_path / "w2"), "--update",
                              "--baseline-run", f"gnmt={baseline}"], toy_data=write_toy_data_dir) == 0
    models = json.loads(results.read_text())["models"]
    assert models["transformer"] == {**other, "command": "older"}
    gnmt = models["gnmt"]
    assert gnmt["baseline_run"] == str(baseline) and gnmt["settings"]["baseline_runs"]
    assert "fp32_finetuned" in gnmt and gnmt["start_x_feedback"]
    assert not (tmp_path / "w2" / "gnmt" / "fp32").exists()  # no baseline trained
    for run in ("fp32-finetune", "q4-log-optimised-fb"):
        init = json.loads((tmp_path / "w2" / "gnmt" / run / "init_from.json").read_text())
        assert str(baseline) in json.dumps(init), run
