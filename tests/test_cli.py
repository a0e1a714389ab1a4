"""The command line end to end on a toy corpus, and one clear error line for bad input."""
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # trains a tiny model first

from tests.helpers import write_toy_data_dir
from tests.training.test_trainer import TINY
from tf_nmt.cli import main


def sets(*items):
    out = []
    for item in items:
        out += ["--set", item]
    return out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    data_dir = write_toy_data_dir(root / "data")
    run = root / "run"
    code = main(["train", "--run-dir", str(run), "--data-dir", str(data_dir)]
                + sets(*TINY, "train.train_steps=30", "train.steps_per_cycle=10", "train.keep_checkpoints=3"))
    assert code == 0
    return run


def test_evaluate_writes_bleu_and_signature(run_dir, tmp_path, capsys):
    out = tmp_path / "report.json"
    assert main(["evaluate", "--run-dir", str(run_dir), "--split", "test", "--beam-size", "2",
                 "--output-json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["sentences"] == 10 and 0.0 <= report["bleu"] <= 100.0
    assert "nrefs:1" in report["signature"]
    assert "sacreBLEU signature" in capsys.readouterr().out


def test_average_checkpoints_and_translate(run_dir, tmp_path, capsys, monkeypatch):
    avg = tmp_path / "avg"
    assert main(["average-checkpoints", "--run-dir", str(run_dir), "--last", "3", "--output-dir", str(avg)]) == 0
    assert (avg / "checkpoint").exists()
    assert main(["average-checkpoints", "--run-dir", str(run_dir), "--last", "3", "--output-dir", str(avg)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["evaluate", "--run-dir", str(run_dir), "--checkpoint", str(avg), "--split", "dev",
                 "--limit", "4"]) == 0
    inp = tmp_path / "in.txt"
    inp.write_text("The file is new.\nThe dog is old.\n")
    outp = tmp_path / "out.txt"
    assert main(["translate", "--run-dir", str(run_dir), "--input", str(inp), "--output", str(outp)]) == 0
    assert len(outp.read_text().splitlines()) == 2


def test_translate_is_line_exact_for_a_run_and_a_saved_model(run_dir, tmp_path, capsys):
    """Characters str.splitlines() breaks at stay inside their line, with the run's checkpoint
    and with its SavedModel export; an empty line stays empty."""
    lines = ["The file\u2028is new.", "The dog\x0cis old.", "", "The menu\x85is new.",
             "The window\x1cis empty.", "The file is new."]
    inp = tmp_path / "in.txt"
    inp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    export = tmp_path / "export"
    assert main(["export", "--run-dir", str(run_dir), "--export-dir", str(export)]) == 0
    for source in (["--run-dir", str(run_dir)], ["--export-dir", str(export)]):
        out = tmp_path / "out.txt"
        assert main(["translate", *source, "--input", str(inp), "--output", str(out),
                     "--batch-size", "2"]) == 0
        got = out.read_text(encoding="utf-8").split("\n")
        assert len(got) == len(lines) + 1 and got[-1] == "" and got[2] == ""
    assert "translated 6 lines" in capsys.readouterr().err


def test_average_into_a_relative_output_dir_is_found_again(run_dir, tmp_path, monkeypatch):
    """The README's form (`--output-dir runs/t1/averaged`, relative to the working directory)."""
    from tf_nmt.compat import tf

    monkeypatch.chdir(tmp_path)
    rel = Path("runs") / "t1" / "averaged"
    assert main(["average-checkpoints", "--run-dir", str(run_dir), "--last", "2",
                 "--output-dir", str(rel)]) == 0
    assert tf.train.latest_checkpoint(str(rel)) == str(rel / "ckpt-0")
    assert main(["evaluate", "--run-dir", str(run_dir), "--checkpoint", str(rel), "--split", "dev",
                 "--limit", "4"]) == 0


def test_average_of_checkpoints_is_the_mean(run_dir, tmp_path):
    import numpy as np

    from tf_nmt.compat import tf
    from tf_nmt.training.checkpoints import average_checkpoints, list_checkpoints
    from tf_nmt.run_dir import RunDirError, load_trained_model

    prefixes = list_checkpoints(run_dir / "checkpoints")[-2:]
    per_ckpt = [load_trained_model(run_dir, p)[0].get_weights() for p in prefixes]
    model, _, _ = load_trained_model(run_dir)
    out = average_checkpoints(model, prefixes, tmp_path / "avg2")
    averaged, _, _ = load_trained_model(run_dir, out)
    for got, a, b in zip(averaged.get_weights(), *per_ckpt):
        np.testing.assert_allclose(got, (a.astype(np.float64) + b) / 2, rtol=1e-6, atol=1e-7)
    assert tf.train.latest_checkpoint(str(tmp_path / "avg2")) == out
    # overwriting replaces it whole; the state file names the checkpoint relative to the directory
    out = average_checkpoints(model, prefixes[-1:], tmp_path / "avg2", overwrite=True)
    assert tf.train.latest_checkpoint(str(tmp_path / "avg2")) == out
    assert "ckpt-0" in (tmp_path / "avg2" / "checkpoint").read_text()
    assert str(tmp_path) not in (tmp_path / "avg2" / "checkpoint").read_text()
    assert (tmp_path / "avg2" / "averaged_from.txt").read_text().split() == prefixes[-1:]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    average_checkpoints(model, prefixes, tmp_path / "avg2", overwrite=True)
    # --checkpoint may name the output directory itself: its latest checkpoint is restored
    by_dir, _, _ = load_trained_model(run_dir, str(tmp_path / "avg2"))
    for got, want in zip(by_dir.get_weights(), averaged.get_weights()):
        np.testing.assert_array_equal(got, want)
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunDirError, match="no checkpoint in the directory"):
        load_trained_model(run_dir, str(tmp_path / "empty"))


@pytest.mark.parametrize("argv,message", [
    (["train", "--run-dir", "{tmp}/r", "--set", "train.peak_rl=1"], "did you mean 'peak_lr'"),
    (["train", "--run-dir", "{tmp}/r", "--data-dir", "{tmp}/nodata"], "prepare-data"),
    (["evaluate", "--run-dir", "{tmp}/not-a-run"], "not a tf-nmt run directory"),
    (["train", "--run-dir", "{tmp}/r", "--set", "model.kind=rnn"], "rnn"),
])
def test_bad_input_is_one_clear_error_line(argv, message, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tf-nmt: error:") and message in err
    assert "Traceback" not in err
