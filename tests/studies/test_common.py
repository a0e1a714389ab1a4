"""Shared study helpers and the ``python -m experiments`` entry point."""
import json

import numpy as np
import pytest

from experiments import STUDIES, run_study
from experiments import __main__ as entry
from experiments.lib import common


def test_rank_files_are_read_in_order_and_a_missing_one_is_an_error(tmp_path):
    for rank in (0, 1):
        common.rank_file(tmp_path, rank).write_text(json.dumps({"rank": rank}))
    assert [r["rank"] for r in common.read_ranks(tmp_path, 2)] == [0, 1]
    with pytest.raises(RuntimeError, match="rank 2"):
        common.read_ranks(tmp_path, 3)


def test_small_helpers(tmp_path):
    assert common.parse_ranks("1, 2,4") == (1, 2, 4)
    with pytest.raises(ValueError):
        common.parse_ranks("0,2")
    assert common.set_args(["a.b=1", "c.d=2"]) == ["--set", "a.b=1", "--set", "c.d=2"]
    counts = common.batch_tokens({"source": np.array([[5, 6, 0], [7, 0, 0]])}, np.array([[1, 0], [2, 3]]))
    assert counts == {"sentences": 2, "source_padded": 6, "target_padded": 4, "source_tokens": 3,
                      "target_tokens": 3}
    out = tmp_path / "r.json"
    common.write_result(out, {"a": 1}, overwrite=False)
    with pytest.raises(SystemExit, match="--overwrite"):
        common.write_result(out, {"a": 2}, overwrite=False)
    common.write_result(out, {"a": 2, "command": "python -m experiments x"}, overwrite=True)
    written = json.loads(out.read_text())
    assert written["a"] == 2
    stamp = written["provenance"]  # every results file says what made it, where and when
    assert stamp["command"] == "python -m experiments x"
    assert len(stamp["git_revision"]) == 40 and isinstance(stamp["git_dirty"], bool)
    assert stamp["date"].startswith("20") and stamp["machine"]["cpus"] >= 1


def test_the_entry_point_forwards_the_study_arguments(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(entry, "run_study", lambda name, argv: seen.append((name, argv)) or 0)
    assert entry.main(["compression", "--modes", "bmuf", "--resume"]) == 0
    assert seen == [("compression", ["--modes", "bmuf", "--resume"])]
    assert set(STUDIES) >= {"accumulation", "throughput", "compression", "hvd-vs-single",
                            "quantization", "transfer", "async"}
    with pytest.raises(ValueError, match="unknown study"):
        run_study("scaling-laws", [])


def test_run_study_runs_the_module_main(tmp_path):
    existing = tmp_path / "transfer.json"
    existing.write_text("{}")
    with pytest.raises(SystemExit, match="exists"):  # refused before anything is trained
        run_study("transfer", ["--output", str(existing), "--work-dir", str(tmp_path / "w")])


def test_a_rank_study_runs_its_worker_or_prepares_the_data_measures_and_writes(
        tmp_path, capsys, monkeypatch):
    from argparse import Namespace

    calls, events = [], []
    monkeypatch.setattr(common, "prepare_data", lambda d, v: events.append(("prepare", str(d), v)))
    figure = tmp_path / "f.png"
    args = Namespace(worker=False, out=tmp_path / "r.json", overwrite=False, preset="quickstart",
                     set=[f"data.data_dir={tmp_path / 'd'}", "data.vocab_size=320"], batch_tokens=64)

    def measure(a):
        events.append(("measure",))
        return {"x": 1}

    draw = {figure: lambda result, path: path.write_text(str(result["x"]))}
    assert common.run_rank_study(args, calls.append, measure, lambda r: "TABLE", draw) == 0
    written = json.loads(args.out.read_text())
    assert written["x"] == 1 and "provenance" in written and figure.read_text() == "1"
    assert "TABLE" in capsys.readouterr().out and calls == []
    # the ranks cannot learn the vocabulary, so it is there before they are launched
    assert events == [("prepare", str(tmp_path / "d"), 320), ("measure",)]
    with pytest.raises(SystemExit, match="exists"):
        common.run_rank_study(args, calls.append, lambda a: {"x": 2}, str, draw)
    args.worker = True
    common.run_rank_study(args, calls.append, lambda a: {"x": 3}, str, draw)
    assert calls == [args] and json.loads(args.out.read_text())["x"] == 1
    assert len(events) == 2  # neither the refusal nor a worker prepares anything


def test_command_line_of_a_study():
    assert common.command_line("compression", ["--modes", "graddrop", "--set", "a.b=c d"]) == \
        "python -m experiments compression --modes graddrop --set 'a.b=c d'"
    assert common.command_line("chaos", []) == "python -m experiments chaos"


def test_prepare_data_learns_a_missing_vocabulary_and_builds_only_a_missing_corpus(
        monkeypatch, tmp_path):
    from tests.helpers import write_toy_data_dir
    from tf_nmt.data import builtin_corpus
    from tf_nmt.data.data_dir import vocab_path

    built = []
    monkeypatch.setattr(builtin_corpus, "prepare_corpus", lambda data_dir: built.append(data_dir))
    data = write_toy_data_dir(tmp_path / "toy")
    common.prepare_data(data, 320)  # a corpus is there: used as it is, only the vocabulary learned
    assert built == [] and vocab_path(data, 320).is_file()
    first = vocab_path(data, 320).read_bytes()
    common.prepare_data(data, 320)  # both there: nothing is redone
    assert vocab_path(data, 320).read_bytes() == first
    empty = tmp_path / "empty"
    with pytest.raises(FileNotFoundError, match="no train split"):  # the fake built nothing
        common.prepare_data(empty, 320)
    assert built == [empty]


def test_hvd_vs_single_prepares_the_data_before_training(monkeypatch, tmp_path):
    from experiments.hvd_vs_single import study as hvd_vs_single

    events = []
    monkeypatch.setattr(common, "prepare_data", lambda d, v: events.append(("prepare", str(d), v)))

    def stop(cmd, log_path, env):
        events.append(("train",))
        raise RuntimeError("stop here")

    monkeypatch.setattr(hvd_vs_single, "run_logged", stop)
    with pytest.raises(RuntimeError, match="stop here"):
        hvd_vs_single.main(["--steps", "2", "--set", f"data.data_dir={tmp_path / 'd'}",
                            "--work-dir", str(tmp_path / "w"), "--out", str(tmp_path / "o.json")])
    assert events == [("prepare", str(tmp_path / "d"), 8000), ("train",)]


def test_only_changes_outside_the_results_folders_make_the_code_dirty():
    """A study that rewrites its own results file after each attempt stays clean (chaos-stress
    once recorded itself as dirty that way); any code change is still dirty."""
    assert not common.code_changed(" M experiments/chaos/results/stress.json\n")
    assert not common.code_changed("")
    assert common.code_changed(" M experiments/chaos/results/stress.json\n M tf_nmt/cli.py\n")
    assert common.code_changed("R  experiments/results/a.py -> experiments/x.py\n")
    assert common.code_changed(" M experiments/chaos/stress.py\n")
