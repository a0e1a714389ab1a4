"""The chaos stress script's arguments and resume logic, without launching anything: the
elastic job (``run_once``) and the data preparation are replaced."""
from __future__ import annotations

import json

import pytest

from experiments import STUDIES
from experiments.chaos import stress


def test_it_is_registered_and_knows_the_elastic_modes():
    from tf_nmt.training.elastic import ELASTIC_MODES

    assert STUDIES["chaos-stress"] == "experiments.chaos.stress"
    assert tuple(stress.ELASTIC_MODES) == tuple(ELASTIC_MODES)


def test_modes_are_checked():
    assert stress.parse_modes("sparse_as_dense, graddrop") == ["sparse_as_dense", "graddrop"]
    with pytest.raises(SystemExit, match="bmuf cannot run elastically"):
        stress.parse_modes("dense,bmuf")
    with pytest.raises(SystemExit, match="unknown mode"):
        stress.parse_modes("carrier_pigeon")
    with pytest.raises(SystemExit, match="at most once"):
        stress.parse_modes("dense,dense")


def fake_run(seen, outcomes=None):
    def run_once(mode, repeat, work, data_dir, hosts, steps, commit_every, timeout, seed):
        seen.append((mode, repeat))
        outcome = (outcomes or {}).get((mode, repeat), "survived")
        return {"mode": mode, "repeat": repeat, "outcome": outcome, "seconds": 1.0,
                "final_step": steps if outcome == "survived" else 3}
    return run_once


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setattr(stress, "prepare_data", lambda args, toy: args.data_dir)
    monkeypatch.setattr(stress.chaos, "local_host_names", lambda: ["a", "b", "c"])


def test_resume_runs_only_the_missing_attempts_and_records_each(tmp_path, offline, monkeypatch):
    out, seen = tmp_path / "stress.json", []
    base = ["--output", str(out), "--work-dir", str(tmp_path / "w"), "--repeats", "2",
            "--modes", "sparse_as_dense,graddrop"]
    monkeypatch.setattr(stress, "run_once", fake_run(seen, {("graddrop", 1): "hung"}))
    assert stress.main(base) == 1  # one hung attempt: not all survived
    assert seen == [("sparse_as_dense", 0), ("graddrop", 0), ("sparse_as_dense", 1), ("graddrop", 1)]
    record = json.loads(out.read_text())
    assert record["summary"]["graddrop"] == {"attempts": 2, "survived": 1, "hung": 1, "failed": 0,
                                             "mean_seconds": 1.0}
    assert "provenance" in record and record["settings"]["steps"] == 160

    with pytest.raises(SystemExit, match="exists"):  # never silently overwritten
        stress.main(base)

    # An interrupted run: drop the last attempt; --resume with one more repeat runs just the gaps.
    record["attempts"] = record["attempts"][:3]
    out.write_text(json.dumps(record))
    seen.clear()
    assert stress.main(base[:-3] + ["3", "--modes", "sparse_as_dense,graddrop", "--resume"]) == 1
    assert seen == [("graddrop", 1), ("sparse_as_dense", 2), ("graddrop", 2)]
    assert len(json.loads(out.read_text())["attempts"]) == 6

    with pytest.raises(SystemExit, match="was made with"):  # other settings: no mixing
        stress.main(base + ["--resume", "--steps", "50"])


def test_arguments_are_refused_before_anything_runs(tmp_path, offline, monkeypatch):
    monkeypatch.setattr(stress, "run_once", lambda *a: pytest.fail("ran"))
    with pytest.raises(SystemExit, match="--workers >= 3"):
        stress.main(["--output", str(tmp_path / "o.json"), "--workers", "2"])
    with pytest.raises(SystemExit, match="fedavg cannot run elastically"):
        stress.main(["--output", str(tmp_path / "o.json"), "--modes", "fedavg"])


def test_keras3_mode_launches_sparse_as_dense_on_keras3(tmp_path, monkeypatch):
    assert stress.parse_modes("sparse_as_dense,keras3") == ["sparse_as_dense", "keras3"]
    launched = []

    def start_elastic(run_dir, data_dir, overrides, hosts, work, **kwargs):
        launched.append((overrides, kwargs.get("env")))
        raise TimeoutError("stop here")  # recorded as hung, nothing launched

    monkeypatch.setattr(stress.chaos, "start_elastic", start_elastic)
    monkeypatch.setattr(stress.chaos, "stop", lambda proc: None)
    for mode in ("keras3", "sparse_as_dense"):
        try:
            stress.run_once(mode, 0, tmp_path / mode, tmp_path, ["a", "b", "c"], 40, 10, 5.0, 0)
        except Exception:  # noqa: BLE001 - only the launch arguments matter here
            pass
    (k3_overrides, k3_env), (k2_overrides, k2_env) = launched
    assert "train.comm=sparse_as_dense" in k3_overrides and k3_env == {"TF_NMT_KERAS": "3"}
    assert "train.comm=sparse_as_dense" in k2_overrides and k2_env == {"TF_NMT_KERAS": "2"}
