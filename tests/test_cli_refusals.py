"""Refusals of the command line, each one clear ``tf-nmt: error:`` line naming what is wrong:
translate/evaluate on a missing or wrong directory, export --quantized with options the packed
file decides, quickstart on a run directory that already holds a run."""
import pytest

from tf_nmt.cli import main
from tf_nmt.config import Config
from tf_nmt.commands.quickstart import new_run_dir
from tf_nmt.run_dir import RunDirError


def error_line(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tf-nmt: error:") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.fixture()
def not_a_run(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.en").write_text("x\n")
    return tmp_path / "data"


@pytest.fixture()
def config_only(tmp_path):
    run = tmp_path / "half"
    run.mkdir()
    Config().save(run / "config.yaml")
    return run


@pytest.mark.parametrize("command", [["translate", "--input", "/dev/null"], ["evaluate"]])
def test_translate_and_evaluate_on_a_missing_or_wrong_run_dir(command, tmp_path, not_a_run,
                                                              config_only, capsys):
    assert "does not exist" in error_line(command + ["--run-dir", str(tmp_path / "nope")], capsys)
    assert "no config.yaml" in error_line(command + ["--run-dir", str(not_a_run)], capsys)
    assert "vocab.model" in error_line(command + ["--run-dir", str(config_only)], capsys)


def test_translate_export_dir_missing_or_not_a_saved_model(tmp_path, not_a_run, capsys):
    for path in (tmp_path / "nope", not_a_run):
        err = error_line(["translate", "--export-dir", str(path), "--input", "/dev/null"], capsys)
        assert "no SavedModel there" in err and str(path) in err


@pytest.mark.parametrize("extra, named", [
    (["--bits", "4"], "--bits"), (["--kind", "log"], "--kind"), (["--scale", "max"], "--scale"),
    (["--quantize-biases"], "--quantize-biases"), (["--run-dir", "r"], "--run-dir"),
])
def test_export_quantized_refuses_options_the_packed_file_decides(extra, named, tmp_path, capsys):
    err = error_line(["export", "--quantized", str(tmp_path / "m.packed"), "--export-dir",
                      str(tmp_path / "out")] + extra, capsys)
    assert f"export --quantized {tmp_path / 'm.packed'}: {named} would be ignored" in err
    assert not (tmp_path / "out").exists()


def test_quickstart_refuses_an_existing_run_and_names_the_flag(tmp_path, capsys):
    run = tmp_path / "runs" / "quickstart"
    run.mkdir(parents=True)
    (run / "meta.json").write_text("{}")
    err = error_line(["quickstart", "--run-dir", str(run), "--data-dir", str(tmp_path / "data"),
                      "--export-dir", str(tmp_path / "export"), "--results",
                      str(tmp_path / "q.json")], capsys)
    assert "already holds a run" in err and "--fresh" in err and str(run) in err
    assert not (tmp_path / "data").exists() and not (tmp_path / "q.json").exists()  # untouched
    assert sorted(p.name for p in run.iterdir()) == ["meta.json"]


def test_quickstart_run_dir_new_empty_existing_and_fresh(tmp_path):
    new = tmp_path / "new"
    assert new_run_dir(new) == new
    new.mkdir()
    assert new_run_dir(new) == new  # empty: nothing to extend
    (new / "config.yaml").write_text("")
    with pytest.raises(RunDirError, match="--fresh"):
        new_run_dir(new)
    fresh = new_run_dir(new, fresh=True)
    assert fresh.parent == tmp_path and fresh.name.startswith("new-") and not fresh.exists()


def test_quickstart_preset_picks_the_recipe_and_unknown_ones_are_refused(tmp_path, monkeypatch, capsys):
    import tf_nmt.commands.quickstart
    from tf_nmt import cli

    seen = {}
    monkeypatch.setattr(tf_nmt.commands.quickstart, "run_quickstart", lambda *a, **kw: seen.update(kw))
    assert cli.main(["quickstart", "--preset", "gnmt-small", "--run-dir", str(tmp_path / "r")]) == 0
    assert seen["preset_name"] == "gnmt-small"
    assert cli.main(["quickstart", "--run-dir", str(tmp_path / "r")]) == 0
    assert seen["preset_name"] == "quickstart"
    with pytest.raises(SystemExit):
        cli.main(["quickstart", "--preset", "gnmt-big"])
    assert "invalid choice: 'gnmt-big'" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # a WMT preset does not fit the quickstart's budget
        cli.main(["quickstart", "--preset", "transformer-big"])
    assert "invalid choice: 'transformer-big'" in capsys.readouterr().err


def test_prepare_data_never_replaces_a_corpus_it_did_not_build(tmp_path, capsys):
    """The user's own files in DATA/corpus: prepare-data refuses to build over them (nothing is
    downloaded or written), and --vocab-only learns their vocabulary without touching them."""
    from tests.helpers import write_toy_data_dir

    data = write_toy_data_dir(tmp_path / "mine")
    (data / "corpus" / "stats.json").unlink(missing_ok=True)  # not built by prepare-data
    before = {p.name: p.read_bytes() for p in (data / "corpus").iterdir()}
    err = error_line(["prepare-data", "--data-dir", str(data)], capsys)
    assert "tf-nmt did not build" in err and "--vocab-only" in err
    assert {p.name: p.read_bytes() for p in (data / "corpus").iterdir()} == before
    assert not (data / "debs").exists() and not (data / "vocab" / "spm-320.model").exists()
    assert "would be ignored" in error_line(["prepare-data", "--data-dir", str(data),
                                             "--vocab-only", "--seed", "7"], capsys)
    assert main(["prepare-data", "--data-dir", str(data), "--vocab-only",
                 "--vocab-size", "320"]) == 0
    assert (data / "vocab" / "spm-320.model").is_file()
    assert {p.name: p.read_bytes() for p in (data / "corpus").iterdir()} == before


@pytest.mark.parametrize("extra, message", [
    (["--checkpoint", "runs/x/checkpoints/ckpt-1"], "--checkpoint would be ignored"),
    (["--beam-size", "2"], "--beam-size would be ignored"),
])
def test_translate_refuses_what_an_export_would_ignore(extra, message, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("Open the file.\n")
    err = error_line(["translate", "--export-dir", str(tmp_path / "export"), "--input",
                      str(tmp_path / "in.txt"), "--output", str(tmp_path / "out.txt"), *extra],
                     capsys)
    assert message in err and not (tmp_path / "out.txt").exists()
