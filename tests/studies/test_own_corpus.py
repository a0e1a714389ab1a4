"""The own-corpus scale studies (``own-corpus-prepare``, ``-memory``, ``-pipeline``): their
pieces (measuring a process tree, reading prepare-data's manifest and output, ratios), and
one tiny run of all three end to end on a 20k-pair synthetic corpus (results to a temp dir)."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import psutil
import pytest

from experiments import STUDIES
from experiments.own_corpus import corpora, memory, pipeline, prepare
from experiments.own_corpus.measure import run_measured

REPO = Path(__file__).resolve().parents[2]


def test_registered_as_studies():
    assert STUDIES["own-corpus-prepare"] == "experiments.own_corpus.prepare"
    assert STUDIES["own-corpus-memory"] == "experiments.own_corpus.memory"
    assert STUDIES["own-corpus-pipeline"] == "experiments.own_corpus.pipeline"


def test_a_process_tree_is_measured_whole_and_killed_whole(tmp_path):
    # A parent holding ~50 MB whose child holds ~200 MB: the tree's peak counts both.
    child = ("import os, time; b = bytearray(200 << 20); print('child ready', os.getpid(), "
             "flush=True); time.sleep(60)")
    parent = ("import subprocess, sys, time; b = bytearray(50 << 20); "
              f"subprocess.Popen([sys.executable, '-c', {child!r}]); time.sleep(60)")
    result = run_measured([sys.executable, "-c", parent], tmp_path / "log", kill_when="child ready",
                          interval=0.05)
    assert result["killed"] and result["returncode"] == -9
    assert result["peak_rss_mb"] > 250
    assert 200 < result["largest_process_mb"] < result["peak_rss_mb"]
    pid = int((tmp_path / "log").read_text().split("child ready")[1].split()[0])
    gone = lambda: (not psutil.pid_exists(pid)  # noqa: E731
                    or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    deadline = time.monotonic() + 10
    while not gone() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gone(), "the child outlived the kill"
    done = run_measured([sys.executable, "-c", "print('hi')"], tmp_path / "log2")
    assert done == {**done, "killed": False, "returncode": 0}
    assert (tmp_path / "log2").read_text().strip() == "hi"


def test_the_manifest_timings_and_cleaning_are_read_as_prepare_data_writes_them():
    timings = {"seconds": {"validate": 1.0, "heldout": 0.1, "distribute": 2.0, "vocab": 30.5,
                           "shards": 40.0}, "pairs_per_s": {"vocab": 100.0}}
    summary = prepare.timing_summary(timings)
    assert (summary["vocab_s"], summary["encode_s"]) == (30.5, 40.0)
    assert summary["passes"]["distribute"] == 2.0
    planted = {"empty_src": 3, "empty_tgt": 4, "overlong": 2, "misaligned": 5, "duplicate": 9}
    cleaning = {"train": {"empty": 7, "too_long": 2, "ratio": 5, "duplicates": 6, "overlap": 2},
                "dev": {"empty": 0, "duplicates": 1}}
    rows = prepare.cleaning_check(planted, cleaning)
    assert rows["empty"] == {"planted": 7, "removed": 7}
    assert rows["duplicates"] == {"planted": 9, "removed": 7}
    assert rows["overlap"] == {"planted": None, "removed": 2}


def test_a_resume_is_recognised_from_prepare_data_output_and_a_data_dir_path_is_not():
    rerun = ("resuming the partial build in /w/data-20000-resume.partial (done: validate; 0 shards)\n"
             "distribute: done by an earlier run, skipped\n"
             "own corpus (xx-yy) written to /w/data-20000-resume: 17,455 train pairs\n")
    assert len(prepare.said_it_resumed(rerun)) == 2
    assert prepare.said_it_resumed("own corpus (xx-yy) written to /w/data-20000-resume\n") == []


def test_memory_ratio_is_the_median_of_per_round_ratios():
    runs = {"small": [{"peak_rss_mb": 1000.0}, {"peak_rss_mb": 1100.0}, {"peak_rss_mb": 1000.0}],
            "large": [{"peak_rss_mb": 1050.0}, {"peak_rss_mb": 1100.0}, {"peak_rss_mb": 1300.0}]}
    summary = memory.summarise(runs)
    assert summary["ratios"] == pytest.approx([1.05, 1.0, 1.3])
    assert summary["ratio"] == pytest.approx(1.05) and summary["within_target"]


def test_arguments_are_checked():
    with pytest.raises(SystemExit):
        prepare.parse_args(["--kill-after", "5"])                   # needs --resume-check
    with pytest.raises(SystemExit):
        memory.parse_args(["--pairs", "100", "--small-pairs", "100"])
    with pytest.raises(SystemExit):
        pipeline.parse_args(["--rounds", "0"])
    tiny = pipeline.parse_args(["--tiny"])
    assert (tiny.pairs, tiny.batch_tokens, tiny.set) == (20_000, 1024, list(corpora.TINY_MODEL))
    assert prepare.parse_args([]).pairs == 4_500_000
    # --tiny results land in the work dir, real ones in the study's results/
    assert corpora.default_out(True, Path("/w"), prepare.__file__, "x.json") == Path("/w/x.json")
    assert corpora.default_out(False, Path("/w"), prepare.__file__, "x.json") == (
        REPO / "experiments" / "own_corpus" / "results" / "x.json")
    assert memory.parse_args([]).small_pairs == 450_000


@pytest.mark.slow
def test_tiny_runs_of_the_three_studies_end_to_end(tmp_path):
    """prepare (with a kill at the vocabulary pass and a resume), then memory and pipeline on the
    same work dir, reusing its prepared corpus; every results file in the temp dir."""
    work = tmp_path / "work"
    out = {name: tmp_path / f"{name}.json" for name in ("prepare", "memory", "pipeline")}
    assert prepare.main(["--tiny", "--work-dir", str(work), "--out", str(out["prepare"]),
                         "--resume-check", "--kill-when", "vocab: learning"]) == 0
    result = json.loads(out["prepare"].read_text())
    assert result["settings"]["pairs"] == 20_000 and result["within_target"]
    assert result["vocab_s"] > 0 and result["encode_s"] > 0 and result["peak_rss_mb"] > 0
    assert result["machine"]["cpu"] and result["provenance"]["command"].startswith(
        "python -m experiments own-corpus-prepare --tiny")
    cleaning = result["cleaning"]
    for reason in ("empty", "too_long", "ratio"):                  # every planted one found
        assert cleaning[reason]["removed"] == cleaning[reason]["planted"] > 0, reason
    assert (cleaning["duplicates"]["removed"] + cleaning["overlap"]["removed"]
            == cleaning["duplicates"]["planted"])
    check = result["resume_check"]
    assert check["killed"]["killed"] and check["resumed"], check
    assert any("done by an earlier run" in line for line in check["resume_lines"])
    assert not (work / "data-20000-resume").exists()

    assert memory.main(["--tiny", "--work-dir", str(work), "--out", str(out["memory"])]) == 0
    mem = json.loads(out["memory"].read_text())
    assert mem["settings"]["pairs"] == {"small": 5_000, "large": 20_000}
    assert mem["corpora"]["small"]["vocab_fingerprint"] == mem["corpora"]["large"]["vocab_fingerprint"]
    assert all(r["peak_rss_mb"] > 100 for runs in mem["runs"].values() for r in runs)
    assert mem["ratio"] == pytest.approx(mem["runs"]["large"][0]["peak_rss_mb"]
                                         / mem["runs"]["small"][0]["peak_rss_mb"])
    assert not (work / "memory-runs" / "small-r0").exists()

    assert pipeline.main(["--tiny", "--work-dir", str(work), "--out", str(out["pipeline"])]) == 0
    pipe = json.loads(out["pipeline"].read_text())
    assert len(pipe["rounds"]) == 2
    assert pipe["settings"]["train_pairs"] == result["splits"]["train"]["pairs"]
    for r in pipe["rounds"]:
        assert r["pipeline"]["target_tokens"] > 0 and r["train"]["target_tokens"] > 0
        assert r["ratio"] == pytest.approx(r["pipeline"]["tgt_tok_per_s"] / r["train"]["tgt_tok_per_s"])
