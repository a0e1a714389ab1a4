"""The emulated-cluster validation of tf-nmt plan's exchange model, recomputed on its recorded
measurement: today's model must give the predictions and errors the results file records, and
those must meet the targets, so a change to the model that breaks agreement fails here."""
from __future__ import annotations

import json

import pytest

from experiments.planning import validate
from tf_nmt.errors import UsageError

DOC = json.loads(validate.RESULTS.read_text())
#: the variant held to the targets (see experiments/planning/README.md)
HELD = "bench"


@pytest.fixture(scope="module")
def recomputed():
    measured = {k: DOC[k] for k in ("settings", "cpu_probe", "benches")}
    measured["points"] = [{k: v for k, v in p.items() if k not in ("predicted", "step_bytes")}
                          for p in DOC["points"]]
    steps = {comm: validate.step_bytes_of(comm, DOC["settings"]) for comm in DOC["settings"]["comms"]}
    return validate.compare(measured, steps.__getitem__)


def test_the_recorded_grid_is_complete():
    s = DOC["settings"]
    assert (s["hosts"], s["links"], s["comms"]) == (
        [2, 3, 4], ["100mbit", "1gbit", "10gbit"], ["dense", "sparse_as_dense", "graddrop"])
    assert len(DOC["points"]) == 27 and len(DOC["benches"]) == 9
    assert DOC["provenance"]["command"].startswith("python -m experiments.planning.validate")


def test_todays_model_gives_the_recorded_predictions(recomputed):
    for mine, theirs in zip(recomputed["points"], DOC["points"]):
        assert mine["step_bytes"] == theirs["step_bytes"]
        for variant in validate.VARIANTS:
            assert mine["predicted"][variant] == pytest.approx(theirs["predicted"][variant],
                                                               rel=1e-9), mine["comm"]
    assert json.loads(json.dumps(recomputed["summary"])) == DOC["summary"]


def test_the_model_meets_both_targets(recomputed):
    # the exchange timed alone (the worker's --exchange-steps): over all 27 points the median
    # and the worst error meet the targets, and so does every group of link x collective
    held = recomputed["summary"][HELD]
    assert held["exchange"]["median_abs_error"] <= validate.TARGETS["median"], held["exchange"]
    assert held["exchange"]["worst_abs_error"] <= validate.TARGETS["worst"], held["exchange"]
    for link in ("100mbit", "1gbit", "10gbit"):
        for collective, points in (("allreduce", 6), ("allgather", 3)):
            group = held["groups"][f"{link}-{collective}"]
            assert group["points"] == points
            assert group["worst_abs_error"] <= validate.TARGETS["worst"], (link, group)
    # bytes: within 5% at the median; the one-MTU packets of the 100 Mbit/s links carry ~4.5%
    # of TCP/IP headers (66 of 1,514 bytes), graddrop's small payload also Horovod's messages
    by = held["bytes"]
    assert by["median_abs_error"] <= 0.05 and by["worst_abs_error"] <= 0.15, by


def test_one_point_by_hand():
    # dense allreduce of every gradient (the tied embedding's is dense) over N hosts
    point = next(p for p in DOC["points"] if p["comm"] == "sparse_as_dense" and p["hosts"] == 4
                 and p["link"] == "100mbit")
    bench = DOC["benches"]["h4-100mbit"]
    total = 4 * point["num_parameters"]
    alpha = max(0.0, bench["small_median_s"] - bench["cycle_s"]) / 6
    expect = 2 * 3 / 4 * total / (100e6 / 8) + 6 * alpha + point["cycle_s"]
    old = point["predicted"]["bench_alphabeta"]  # the alpha-beta model alone: a whole cycle
    beta = 2 * 3 / 4 * bench["bytes"] / (bench["median_s"] - bench["small_median_s"])
    assert old["exchange_s"] == pytest.approx(expect - total * 1.5 / (100e6 / 8)
                                              + total * 1.5 / beta)
    rate = point["predicted"]["rate"]
    gamma, copy = DOC["cpu_probe"]["gamma_s_per_byte"], DOC["cpu_probe"]["copy_s_per_byte"]
    expect += -point["cycle_s"] / 2 + 2 * (3 / 4 * total * gamma + 2 * total * copy)
    assert rate["exchange_s"] == pytest.approx(expect)
    assert rate["link_bytes"] == pytest.approx(2 * 3 / 4 * total)


def test_the_cpu_terms_by_hand():
    # the held variant: the bench's network less its allreduce's CPU work, half a cycle waited,
    # the reduction, fusion copies and graddrop's compute, all slowed by N hosts on 2 cores
    probe = DOC["cpu_probe"]
    assert probe["cores"] == 2 and probe["command"].startswith("python -m experiments.planning")
    gamma, copy, drop = (probe[k] for k in validate.CPU_CONSTANTS)
    assert 0 < gamma < 1e-8 and 0 < copy < gamma and 0 < drop < 1e-7
    n = 4
    for comm in ("sparse_as_dense", "graddrop"):
        point = next(p for p in DOC["points"] if p["comm"] == comm and p["hosts"] == n
                     and p["link"] == "10gbit")
        bench = DOC["benches"]["h4-10gbit"]
        slow = n / 2
        b = 4 * point["num_parameters"]
        alpha = max(0.0, bench["small_median_s"] - bench["cycle_s"]) / 6
        bench_cpu = slow * (3 / 4 * bench["bytes"] * gamma + 2 * bench["bytes"] * copy)
        beta = 2 * 3 / 4 * bench["bytes"] / (bench["median_s"] - bench["small_median_s"] - bench_cpu)
        half_cycle = point["cycle_s"] / 2
        if comm == "sparse_as_dense":
            expect = (2 * 3 / 4 * b / beta + 6 * alpha + half_cycle
                      + slow * (3 / 4 * b * gamma + 2 * b * copy))
        else:
            total = point["step_bytes"]["allgather_slice"] * n
            # GradDrop's exchanges slow each other down by the probed parallelism, not the cores
            parallel = probe["graddrop_parallel"]
            assert 0.5 < parallel <= probe["cores"] + 0.2
            expect = (3 / 4 * total / beta + 3 * alpha + half_cycle
                      + max(1.0, n / parallel) * point["num_parameters"] * drop)
        assert point["predicted"]["bench"]["exchange_s"] == pytest.approx(expect), comm


def test_resume_refuses_other_settings_and_both_flags(tmp_path):
    out = tmp_path / "v.json"
    out.write_text(json.dumps({"settings": {"hosts": [2]}}))
    with pytest.raises(UsageError, match="other settings"):
        validate.main(["--resume", "--out", str(out)])
    with pytest.raises(UsageError, match="not both"):
        validate.main(["--resume", "--overwrite", "--out", str(out)])
    with pytest.raises(UsageError, match="no .* to resume"):
        validate.main(["--resume", "--out", str(tmp_path / "none.json")])
    with pytest.raises(SystemExit, match="exists"):
        validate.main(["--out", str(out)])


def test_resume_recomputes_without_measuring(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("--resume on a complete file measured something")

    for name in ("measure_bench", "measure_point", "measure_cpu"):
        monkeypatch.setattr(validate, name, refuse)
    out = tmp_path / "v.json"
    out.write_text(validate.RESULTS.read_text())
    assert validate.main(["--resume", "--out", str(out)]) == 0
    again = json.loads(out.read_text())
    assert again["cpu_probe"] == DOC["cpu_probe"] and again["summary"] == DOC["summary"]
    assert [p["comm_paired_s"] for p in again["points"]] == [p["comm_paired_s"] for p in DOC["points"]]
