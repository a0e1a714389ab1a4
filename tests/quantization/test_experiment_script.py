"""scripts/quantization_experiment.py: which cells get a re-training run (no training here)."""
import importlib.util
from pathlib import Path
from types import SimpleNamespace

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "quantization_experiment.py"
spec = importlib.util.spec_from_file_location("quantization_experiment", SCRIPT)
exp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(exp)

QuantPolicy = exp.QuantPolicy
CELLS = [QuantPolicy(bits=4), QuantPolicy(bits=4, scale="max"), QuantPolicy(bits=4, quantize_biases=True),
         QuantPolicy(bits=2), QuantPolicy(bits=4, kind="fixed")]


def retrains(argv, policy, scratch=False):
    experiment = SimpleNamespace(args=exp.parse_args(argv))
    return exp.Experiment.retrains(experiment, policy, scratch)


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
