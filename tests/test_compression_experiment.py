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
        assert mode == ("sparse_as_dense" if name in ("dense", "single") else name.split("_")[0])


def test_single_reference_does_what_the_ranks_do_together(tmp_path):
    args = exp.parse_args(["--np", "2", "--set", "data.batch_tokens=2048", "--results",
                           str(tmp_path / "r.json"), "--plot", str(tmp_path / "p.png")])
    single = exp.run_overrides(args, "transformer", "single")
    # quickstart: peak 2e-3, warm-up 300; the trainer's rule for 2 workers: 4e-3, 150
    assert single[-4:] == ["data.batch_tokens=4096", "train.peak_lr=0.004",
                           "train.warmup_steps=150", "train.scale_lr_with_workers=false"]
    args.set.append("train.scale_lr_with_workers=false")
    assert exp.run_overrides(args, "transformer", "single")[-4:-1] == [
        "data.batch_tokens=4096", "train.peak_lr=0.002", "train.warmup_steps=300"]
    assert not any(o.startswith("data.batch_tokens=4096") for o in exp.run_overrides(args, "transformer", "dense"))


def test_resume_reuses_only_a_finished_run_with_the_same_settings(tmp_path):
    import json

    argv = ["--results", str(tmp_path / "r.json"), "--plot", str(tmp_path / "p.png")]
    args = exp.parse_args(argv + ["--resume", "--steps", "40"])
    run_dir = tmp_path / "transformer-dense"
    run_dir.mkdir()
    with pytest.raises(SystemExit, match="unfinished"):  # no record: never trained to the end
        exp.train_run(args, "transformer", "dense", run_dir)
    record = {"overrides": exp.run_overrides(args, "transformer", "dense"), "launched": 1.0,
              "wall_seconds": 2.0, "stdout": ""}
    (run_dir / exp.RUN_RECORD).write_text(json.dumps(record))
    assert exp.train_run(args, "transformer", "dense", run_dir) == record
    with pytest.raises(SystemExit, match="other settings"):
        exp.train_run(exp.parse_args(argv + ["--resume", "--steps", "80"]), "transformer", "dense", run_dir)
    with pytest.raises(SystemExit):
        exp.parse_args(argv + ["--resume", "--overwrite"])


def test_against_single_compares_at_the_shared_steps():
    runs = [{"model": "transformer", "mode": "single", "curve": [{"step": 500, "bleu": 4.0},
                                                                  {"step": 1000, "bleu": 6.0}]},
            {"model": "transformer", "mode": "dense", "curve": [{"step": 500, "bleu": 3.5},
                                                                 {"step": 1000, "bleu": 6.25}]},
            {"model": "transformer", "mode": "graddrop", "curve": [{"step": 500, "bleu": 1.0}]}]
    rows = exp.against_single(runs)
    assert rows == [{"model": "transformer", "mode": "dense", "bleu_minus_single": {500: -0.5, 1000: 0.25}},
                    {"model": "transformer", "mode": "graddrop", "bleu_minus_single": {500: -3.0}}]
    assert exp.against_single(runs[1:]) == []


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
