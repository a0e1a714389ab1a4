"""The chaos stress script's arguments and resume logic, without launching anything: the
elastic job (``run_once``) and the data preparation are replaced."""
from __future__ import annotations

import json

import pytest

from experiments import STUDIES
from experiments.chaos import stress


def test_it_is_registered_and_knows_the_elastic_modes():
    from tf_nmt.training.elastic import ELASTIC_MODES, FINGERPRINT_DIR

    assert STUDIES["chaos-stress"] == "experiments.chaos.stress"
    assert tuple(stress.ELASTIC_MODES) == tuple(ELASTIC_MODES)
    assert stress.chaos.FINGERPRINT_DIR == FINGERPRINT_DIR  # where the trainer writes them


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
                "final_step": steps if outcome == "survived" else 3, "rank_checks": 3}
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
    assert record["summary"]["graddrop"] == {"attempts": 2, "survived": 1, "diverged": 0, "hung": 1,
                                             "failed": 0, "mean_seconds": 1.0}
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

    # attempts recorded before the ranks' fingerprints were checked are not resumed
    del record["attempts"][0]["rank_checks"]
    out.write_text(json.dumps(record))
    with pytest.raises(SystemExit, match="before the ranks' fingerprints were checked"):
        stress.main(base[:-3] + ["3", "--modes", "sparse_as_dense,graddrop", "--resume"])


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


def write_elastic_run(run, steps, fingerprints_by_event, exit_step=None):
    """A run directory as an elastic job of 3 workers leaves it after one kill at step 40 (resumed
    from the commit at 30 with 2): its progress, attempts and each rank's fingerprints
    (``fingerprints_by_event``: (event, attempt) -> one fingerprint per rank)."""
    from horovod_patches import fingerprint as fingerprints

    run.mkdir(parents=True)
    last = steps if exit_step is None else exit_step
    (run / "progress.jsonl").write_text("".join(json.dumps({"step": s, "loss": 1.0}) + "\n"
                                                for s in range(5, last + 1, 5)))
    (run / "elastic.jsonl").write_text(
        json.dumps({"attempt": 1, "world_size": 3, "step": 0, "failed_at": None,
                    "steps_lost": 0}) + "\n"
        + json.dumps({"attempt": 2, "world_size": 2, "step": 30, "failed_at": 40,
                      "steps_lost": 10}) + "\n")
    where = {("sync", 1): (0, 3), ("sync", 2): (30, 2), ("end", 2): (steps, 2)}
    for (event, attempt), prints in fingerprints_by_event.items():
        step, world = where[(event, attempt)]
        for rank, fingerprint in enumerate(prints):
            fingerprints.record(run / stress.chaos.FINGERPRINT_DIR, event, step, rank, world,
                                fingerprint, attempt=attempt)


AGREED = {("sync", 1): ["a", "a", "a"], ("sync", 2): ["b", "b"], ("end", 2): ["c", "c"]}


def test_an_attempt_survives_only_if_the_ranks_agree_after_every_recovery(tmp_path):
    def outcome(prints, code=0, exit_step=None):
        run = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
        write_elastic_run(run, 160, prints, exit_step)
        agreement = stress.chaos.rank_agreement(run, finished=code == 0)
        final = stress.chaos.last_step(run)
        return stress.judge(code, final, 160, agreement), agreement

    (result, error), agreement = outcome(AGREED)
    assert (result, error) == ("survived", None) and agreement == {"checks": 3, "problems": []}

    # rank 1 came out of the recovery at step 30 with other weights: diverged, whatever the exit
    (result, error), agreement = outcome({**AGREED, ("sync", 2): ["b", "x"]})
    assert result == "diverged", error
    assert "sync of attempt 2 (step 30, 2 workers): 0 vs 1" in error
    assert agreement["problems"] == [{"kind": "diverged", "event": "sync", "attempt": 2,
                                      "step": 30, "world_size": 2, "ranks": {"b": [0], "x": [1]}}]
    assert outcome({**AGREED, ("end", 2): ["c", "y"]})[0][0] == "diverged"  # at the end only
    assert outcome({**AGREED, ("sync", 2): ["b", "x"]}, code=1, exit_step=80)[0][0] == "diverged"

    # a finished job whose fingerprints are incomplete is not counted as survived
    (result, error), _ = outcome({**AGREED, ("sync", 2): ["b"]})
    assert result == "failed" and "rank(s) [1] at the sync of attempt 2" in error
    (result, error), _ = outcome({k: v for k, v in AGREED.items() if k != ("end", 2)})
    assert result == "failed" and "at the end" in error
    (result, error), _ = outcome({k: v for k, v in AGREED.items() if k != ("sync", 2)})
    assert result == "failed" and "at the sync of attempt 2" in error
    # a failed job with agreeing ranks stays failed (its missing fingerprints are expected)
    (result, error), agreement = outcome({("sync", 1): ["a", "a", "a"]}, code=1, exit_step=80)
    assert (result, error) == ("failed", "exit code 1 at step 80 of 160")
    assert agreement["problems"] == []


def test_run_once_records_a_divergence_with_its_step_and_ranks(tmp_path, monkeypatch):
    class Job:
        pid, returncode = 4242, 0

        def wait(self, timeout=None):
            return 0

    def start_elastic(run_dir, data_dir, overrides, hosts, work, **kwargs):
        write_elastic_run(run_dir, 40, {**AGREED, ("end", 2): ["c", "z"]})
        return Job()

    monkeypatch.setattr(stress.chaos, "start_elastic", start_elastic)
    monkeypatch.setattr(stress.chaos, "wait_for", lambda *a, **k: None)
    monkeypatch.setattr(stress.chaos, "worker_pids", lambda pid: [4243])
    monkeypatch.setattr(stress.chaos, "stop", lambda proc: None)
    monkeypatch.setattr(stress, "_rank", lambda pid: 1)
    killed = []
    monkeypatch.setattr(stress.os, "kill", lambda pid, sig: killed.append(pid))
    record = stress.run_once("dense", 0, tmp_path / "w", tmp_path, ["a", "b", "c"], 40, 10, 5.0, 0)
    assert killed == [4243] and record["exit_code"] == 0 and record["final_step"] == 40
    assert record["outcome"] == "diverged" and record["rank_checks"] == 3
    assert record["rank_problems"] == [{"kind": "diverged", "event": "end", "attempt": 2,
                                        "step": 40, "world_size": 2,
                                        "ranks": {"c": [0], "z": [1]}}]
    assert stress.summarise([record])["dense"]["diverged"] == 1


def test_fingerprints_hash_every_value_in_order():
    import numpy as np

    from horovod_patches import fingerprint as fingerprints

    class Var:
        def __init__(self, value):
            self.value = np.asarray(value)

        def numpy(self):
            return self.value

    a, b = Var([1.0, 2.0]), Var([[3.0]])
    base = fingerprints.state_fingerprint([a, b])
    assert base == fingerprints.state_fingerprint([Var([1.0, 2.0]), Var([[3.0]])])
    assert base != fingerprints.state_fingerprint([b, a])                      # order
    assert base != fingerprints.state_fingerprint([a, Var([3.0])])             # shape
    assert base != fingerprints.state_fingerprint([a, Var(np.float16([[3.0]]))])  # dtype
    assert base != fingerprints.state_fingerprint([Var([1.0, 2.0 + 1e-12]), b])  # one bit
