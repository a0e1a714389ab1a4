"""The per-checkpoint BLEU curve: every kept checkpoint scored once per settings, by step."""
import os

import pytest

from experiments.lib import curves


@pytest.fixture
def run_dir(tmp_path):
    """A run directory whose checkpoint state lists ckpt-20 and ckpt-10 (written out of order)."""
    ckpts = tmp_path / "run" / "checkpoints"
    ckpts.mkdir(parents=True)
    lines = [f'model_checkpoint_path: "{ckpts}/ckpt-20"']
    for step in (10, 20):
        lines.append(f'all_model_checkpoint_paths: "{ckpts}/ckpt-{step}"')
        index = ckpts / f"ckpt-{step}.index"
        index.write_bytes(b"")
        os.utime(index, (1000.0 + step, 1000.0 + step))
    (ckpts / "checkpoint").write_text("\n".join(lines) + "\n")
    return tmp_path / "run"


def test_curve_scores_each_checkpoint_once_per_settings(run_dir, monkeypatch):
    calls = []

    def fake_evaluate(root, split, checkpoint, data_dir, beam_size, limit, log):
        calls.append((checkpoint.rsplit("-", 1)[1], split, limit, beam_size))
        return {"bleu": float(checkpoint.rsplit("-", 1)[1]) / 2, "chrf": 1.0}

    monkeypatch.setattr(curves, "evaluate_run", fake_evaluate)
    curve = curves.bleu_curve(run_dir, "dev", limit=5, launched=1000.0, log=lambda _m: None)
    assert curve == [{"step": 10, "bleu": 5.0, "chrf": 1.0, "seconds": 10.0},
                     {"step": 20, "bleu": 10.0, "chrf": 1.0, "seconds": 20.0}]
    assert sorted(calls) == [("10", "dev", 5, None), ("20", "dev", 5, None)]
    again = curves.bleu_curve(run_dir, "dev", limit=5, log=lambda _m: None)
    assert len(calls) == 2 and [p["bleu"] for p in again] == [5.0, 10.0]  # cached
    assert "seconds" not in again[0]
    curves.bleu_curve(run_dir, "dev", limit=7, log=lambda _m: None)  # other settings: rescored
    assert len(calls) == 4
    assert curves.trained_steps(run_dir) == 20 and curves.trained_steps(run_dir / "none") == 0


def test_first_reaching_and_checkpoint_step():
    curve = [{"step": 10, "bleu": 1.0}, {"step": 20, "bleu": 3.0}, {"step": 30, "bleu": 2.0}]
    assert curves.first_reaching(curve, 2.5)["step"] == 20
    assert curves.first_reaching(curve, 5.0) is None
    assert curves.checkpoint_step("/x/run-3/checkpoints/ckpt-1500") == 1500
