"""The serving-speed study on a tiny trained run: every variant timed for every band and
request size, the chunked and greedy exports built as asked, the table and JSON written."""
import json

import pytest

from tests.helpers import write_toy_data_dir
from tests.training.test_trainer import tiny_config
from experiments.serving_speed import study as serving_speed
from tf_nmt.training.trainer import train

pytestmark = pytest.mark.slow  # trains a tiny model and exports it three times


def test_band_selection_keeps_file_order():
    sources = ["a", "b", "c", "d", "e"]
    lengths = [3, 12, 30, 5, 11]
    assert serving_speed.band_sentences(sources, lengths, "short", 10) == ["a", "d"]
    assert serving_speed.band_sentences(sources, lengths, "medium", 1) == ["b"]
    assert serving_speed.band_sentences(sources, lengths, "long", 10) == ["c"]
    assert serving_speed.band_sentences(sources, lengths, "mixed", 3) == ["a", "b", "c"]
    assert serving_speed.variant_names([8, 16], greedy=False) == [
        "export", "export-chunk8", "export-chunk16", "evaluate"]


def test_study_end_to_end(tmp_path, capsys):
    data_dir = write_toy_data_dir(tmp_path / "data")
    run = tmp_path / "run"
    train(tiny_config(data_dir, "train.train_steps=20", "train.steps_per_cycle=20"), run,
          log=lambda _m: None)
    out = tmp_path / "serving.json"
    argv = ["--run-dir", str(run), "--data-dir", str(data_dir), "--split", "train",
            "--per-band", "4", "--bands", "medium,mixed", "--batch-sizes", "1,3",
            "--chunk-sizes", "2", "--rounds", "2", "--out", str(out)]
    assert serving_speed.main(argv) == 0
    report = json.loads(out.read_text())
    assert report["variants"] == ["export", "export-chunk2", "export-beam1", "evaluate"]
    assert len(report["rows"]) == 4 * 2 * 2  # variants x bands x request sizes
    for row in report["rows"]:
        assert len(row["seconds"]) == 2 and row["sentences_per_s"] > 0
        assert 0.0 <= row["agreement_with_export"] <= 1.0
    plain = [r for r in report["rows"] if r["variant"] == "export"]
    assert all(r["agreement_with_export"] == 1.0 for r in plain)
    assert "export-chunk2" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # never silently replaced
        serving_speed.main(argv)
    with pytest.raises(SystemExit):
        serving_speed.main(argv[:-2] + ["--out", str(tmp_path / "x.json"), "--bands", "huge"])
