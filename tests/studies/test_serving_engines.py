"""The serving-engines study (issue 46 item 5): its --tiny mode end to end on a tiny trained run
(SavedModel, CTranslate2 float32 and int8 exported from one checkpoint, timed, scored, weighed
in fresh processes), the JSON's structure, CTranslate2 float32 greedy = the SavedModel's greedy,
and the targets' verdicts."""
import argparse
import json

import pytest

from experiments.lib import common
from experiments.serving_speed import engines


def row(engine, speed, beam=4, band="mixed", batch=32):
    return {"engine": engine, "beam": beam, "band": band, "batch": batch,
            "x_savedmodel_sentences_per_s": speed}


def bleu(engine, diff, beam=4):
    return {"engine": engine, "beam": beam, "bleu_minus_savedmodel": diff}


def test_rotation_and_targets():
    assert [engines.rotated(engines.ENGINES, r) for r in range(3)] == [
        ["savedmodel", "ct2-float32", "ct2-int8"], ["ct2-float32", "ct2-int8", "savedmodel"],
        ["ct2-int8", "savedmodel", "ct2-float32"]]
    rows = [row("savedmodel", 1.0), row("ct2-float32", 2.5), row("ct2-int8", 3.9)]
    scores = [bleu("savedmodel", 0.0), bleu("ct2-float32", 0.15), bleu("ct2-int8", -0.4)]
    got = {t["engine"]: t for t in engines.check_targets(rows, scores)}
    assert got["ct2-int8"]["speed_passed"] is False and got["ct2-int8"]["bleu_passed"] is True
    assert got["ct2-int8"]["passed"] is False
    # float32: "within 0.1" is two-sided; int8's 0.5 is a cost (a BLEU gain is fine)
    assert got["ct2-float32"]["speed_passed"] is True and got["ct2-float32"]["bleu_passed"] is False
    rows[2], scores[2] = row("ct2-int8", 4.2), bleu("ct2-int8", 0.7)
    got = {t["engine"]: t for t in engines.check_targets(rows, scores)}
    assert got["ct2-int8"]["passed"] is True
    other_cell = [row(e, 5.0, batch=4) for e in engines.ENGINES]
    assert all(t["passed"] is None for t in engines.check_targets(other_cell, scores))


def test_ct2_flags_reach_the_translators():
    """Only the levers asked for are passed on (the rest stay the translator's defaults)."""
    args = argparse.Namespace(ct2_threads=0, ct2_inter_threads=2, ct2_mkl="off",
                              ct2_isa="AVX2", vmap=False)
    assert engines.ct2_options(args) == {"inter_threads": 2, "use_mkl": False,
                                         "cpu_isa": "AVX2", "use_vmap": False}
    args = argparse.Namespace(ct2_threads=1, ct2_inter_threads=0, ct2_mkl="auto",
                              ct2_isa="auto", vmap=None)
    assert engines.ct2_options(args) == {"intra_threads": 1}


def test_tiny_output_is_never_the_results_file():
    results = common.results_path(engines.__file__, "serving_engines.json")
    assert engines.TINY_OUT != results and common.ROOT not in engines.TINY_OUT.parents


@pytest.mark.slow  # trains a tiny model, exports it four times, starts three processes
def test_tiny_end_to_end(tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    from tests.helpers import write_toy_data_dir
    from tests.training.test_trainer import tiny_config
    from tf_nmt.training.trainer import train

    data_dir = write_toy_data_dir(tmp_path / "data")
    run = tmp_path / "run"
    train(tiny_config(data_dir, "train.train_steps=60", "train.steps_per_cycle=30"), run,
          log=lambda _m: None)
    out = tmp_path / "engines.json"
    argv = ["--run-dir", str(run), "--tiny", "--out", str(out)]
    assert engines.main(argv) == 0
    printed = capsys.readouterr().out
    assert "ct2-int8" in printed and "targets" in printed and "peak RSS" in printed
    report = json.loads(out.read_text())

    assert report["tiny"] is True and report["rounds"] == 1 and "provenance" in report
    assert report["engines"] == ["savedmodel", "ct2-float32", "ct2-int8"]
    assert report["beams"] == [1, 4] and report["batch_sizes"] == [1, 4]
    assert report["bands"] and "mixed" in report["bands"]
    assert set(report["bands"]) | set(report["skipped_bands"]) == set(engines.BANDS)
    # one checkpoint for all four exports: a SavedModel per beam, CTranslate2 float32 and int8
    commands = report["export_commands"]
    assert len(commands) == 4
    assert all(f"--checkpoint {report['checkpoint']} " in c for c in commands)
    assert sum("--format ctranslate2" in c for c in commands) == 2
    assert any("--quantization int8" in c for c in commands)
    info = report["engine_info"]
    for engine in ("ct2-float32", "ct2-int8"):  # the translator's defaults, recorded
        threads = info[engine]["threads"]
        assert threads["intra_threads"] * threads["inter_threads"] == engines.usable_cores()
        assert threads["source"].startswith("default") and info[engine]["asked"] == {}
        assert {"CT2_USE_MKL", "CT2_FORCE_CPU_ISA"} <= set(info[engine]["backend"])
        assert info[engine]["vocabulary_map"] is False  # no map unless asked (VMAP_BY_DEFAULT)
    assert set(info["savedmodel"]["threads"]) >= {"intra_op", "inter_op"}

    rows = report["rows"]
    assert len(rows) == 3 * 2 * len(report["bands"]) * 2  # engines x beams x bands x sizes
    for r in rows:
        assert len(r["seconds"]) == 1 and r["sentences_per_s"] > 0
        assert r["target_tokens_per_s"] >= 0 and r["x_savedmodel_sentences_per_s"] > 0
        if r["engine"] == "savedmodel":
            assert r["x_savedmodel_sentences_per_s"] == 1.0
    # CTranslate2 float32 greedy = the SavedModel's greedy, request by request and on the BLEU set
    greedy = [r for r in rows if r["engine"] == "ct2-float32" and r["beam"] == 1]
    assert greedy and all(r["identical_to_savedmodel"] == 1.0 for r in greedy)
    scores = {(b["engine"], b["beam"]): b for b in report["bleu"]}
    assert set(scores) == {(e, b) for e in engines.ENGINES for b in (1, 4)}
    assert report["bleu_sentences"] == engines.TINY["limit"]
    assert scores[("ct2-float32", 1)]["identical_to_savedmodel"] == 1.0
    assert scores[("ct2-float32", 1)]["differences"] == []
    for (engine, beam), b in scores.items():
        assert b["bleu"] >= 0 and "tok:13a" in b["signature"]
        base = scores[("savedmodel", beam)]["bleu"]
        assert b["bleu_minus_savedmodel"] == pytest.approx(b["bleu"] - base)

    rss = report["peak_rss"]
    assert rss["batch"] == 32 and rss["beam"] == 4 and set(rss["engines"]) == set(engines.ENGINES)
    for engine, r in rss["engines"].items():
        assert r["maxrss_kib"] >= r["maxrss_kib_at"]["loaded"] > r["maxrss_kib_at"]["start"] > 0
        assert r["tensorflow_imported"] == (engine == "savedmodel")
    # each process's own peak, not the benchmark's carried over: TensorFlow weighs far more
    assert rss["engines"]["ct2-int8"]["maxrss_kib"] < rss["engines"]["savedmodel"]["maxrss_kib"] / 2

    targets = report["targets"]
    assert [t["engine"] for t in targets] == ["ct2-int8", "ct2-float32"]
    assert all(t["passed"] is None for t in targets)  # tiny mode has no 32-sentence requests

    with pytest.raises(SystemExit):  # never silently replaced
        engines.main(argv)
