"""scripts/compression_experiment.py: argument checks, log parsing, summary (no training here)."""
import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "compression_experiment.py"
spec = importlib.util.spec_from_file_location("compression_experiment", SCRIPT)
exp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(exp)


def test_arguments_are_checked(tmp_path):
    args = exp.parse_args(["--modes", "dense,bmuf", "--models", "lstm", "--results",
                           str(tmp_path / "r.json"), "--plot", str(tmp_path / "p.png")])
    assert args.modes == ["dense", "bmuf"] and args.models == ["lstm"]
    with pytest.raises(SystemExit):
        exp.parse_args(["--modes", "topk"])
    with pytest.raises(SystemExit):
        exp.parse_args(["--eval-every", "300", "--average-every", "500"])
    existing = tmp_path / "exists.json"
    existing.write_text("{}")
    with pytest.raises(SystemExit):
        exp.parse_args(["--results", str(existing), "--plot", str(tmp_path / "p.png")])


def test_every_variant_is_a_valid_config():
    from tf_nmt.config import load_config
    from tf_nmt.distributed.comm import resolve_comm

    for name, overrides in exp.VARIANTS.items():
        mode = resolve_comm(load_config(overrides=overrides).train).mode
        assert mode == ("sparse_as_dense" if name == "dense" else name.split("_")[0])


def test_progress_lines_summary_and_threshold():
    stdout = ("step     20/40 | loss 7.1000 | lr 1.00e-03 | 3,000 tgt tok/s | 0.5 s/step\n"
              "step     40/40 | loss 6.5000 | lr 1.00e-03 | 5,000 tgt tok/s (2,500/rank) | 0.4 s/step\n")
    rows = exp.progress(stdout)
    assert [r["step"] for r in rows] == [20, 40] and rows[1]["tokens_per_s"] == 5000
    stats = {"sent_bytes_per_step": 10.0, "dense_bytes_per_step": 1000, "reduction": 100.0,
             "mean_density": 0.02, "per_step": [{"step": 1, "sent_bytes": 100}, {"step": 2, "sent_bytes": 10}]}
    curve = [{"step": 20, "seconds": 60.0, "bleu": 3.0}, {"step": 40, "seconds": 120.0, "bleu": 9.0}]
    dense = exp.summarise("transformer", "dense", {"stdout": stdout, "wall_seconds": 130.0}, curve, stats, 1)
    gd = exp.summarise("transformer", "graddrop", {"stdout": stdout, "wall_seconds": 130.0},
                       curve[:1], stats, 1)
    assert dense["final_bleu"] == 9.0 and dense["tgt_words_per_s"] == 5000
    assert dense["bytes_per_step_after_drop_warmup"] == 10
    exp.time_to_threshold([dense, gd], 0.0)
    assert dense["bleu_threshold"] == pytest.approx(8.1)
    assert dense["seconds_to_threshold"] == 120.0 and gd["seconds_to_threshold"] is None
    assert "graddrop" in exp.table([dense, gd])
