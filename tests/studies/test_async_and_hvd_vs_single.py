"""The async and Horovod-vs-one-process studies: the runs they launch, and their tables."""
import json

import pytest

from tf_nmt.config import load_config
from experiments.async_sgd import study as asynchronous
from experiments.hvd_vs_single import study as hvd_vs_single


def fake_run(work_dir, command, argv, bleu):
    """What ``tf-nmt train-async`` / ``evaluate`` leave in a run directory, without training."""
    run = work_dir / argv[argv.index("--run-dir") + 1].split("/")[-1]
    if command == "train-async":
        run.mkdir(parents=True)
        (run / "async.json").write_text(json.dumps(
            {"k": 1, "updates": 4, "pushes": 4, "final_loss": 3.0, "diverged": False,
             "mean": 0.5, "max": 1, "histogram": [2, 2], "seconds": 1.0,
             "losses": [4.0, 3.5, 3.2, 3.0]}))
    else:
        (run / "dev.json").write_text(json.dumps({"bleu": bleu}))


def test_async_modes_and_overrides():
    assert asynchronous.mode_args("sync", 4, 3) == ["--k", "4", "--synchronous"]
    assert asynchronous.mode_args("async", 4, 3) == ["--k", "1"]
    assert asynchronous.mode_args("sync+stale", 4, 3)[-2:] == ["--refresh-every", "3"]
    overrides = asynchronous.run_overrides("gnmt", 0.001, 20, True, ["train.seed=2"])
    cfg = load_config(overrides=overrides)
    assert cfg.model.kind == "gnmt" and cfg.train.schedule == "constant"
    assert cfg.train.peak_lr == 0.001 and cfg.train.train_steps == 20 and cfg.train.seed == 2


def test_downpour_mode_pushes_fetches_and_clips():
    assert asynchronous.mode_args("downpour", 4, 3, n_push=5, n_fetch=2) == [
        "--k", "1", "--n-push", "5", "--n-fetch", "2"]
    clipped = asynchronous.run_overrides("transformer", 0.001, 20, False, [], "downpour", 1.5)
    assert load_config(overrides=clipped).train.clip_norm == 1.5
    plain = asynchronous.run_overrides("transformer", 0.001, 20, False, [], "async", 1.5)
    assert load_config(overrides=plain).train.clip_norm == 0.0  # only Downpour clips
    with pytest.raises(SystemExit):
        asynchronous.main(["--modes", "hogwild"])


def test_async_resume_reuses_finished_runs_only(tmp_path, monkeypatch):
    calls = []

    def fake_tf_nmt(command, *argv):
        calls.append(command)
        fake_run(tmp_path / "w", command, argv, bleu=1.25)

    monkeypatch.setattr(asynchronous.common, "run_tf_nmt", fake_tf_nmt)
    argv = ["--work-dir", str(tmp_path / "w"), "--output", str(tmp_path / "a.json"),
            "--kinds", "gnmt", "--lrs", "0.001", "--modes", "async,downpour", "--updates", "4"]
    asynchronous.main(argv)
    assert calls == ["train-async", "evaluate"] * 2
    done = json.loads((tmp_path / "a.json").read_text())
    assert done["complete"] and done["planned_runs"] == 2
    assert done["command"].startswith("python -m experiments async --work-dir")
    with pytest.raises(SystemExit):  # without --resume an existing grid is not replaced
        asynchronous.main(argv)
    asynchronous.main(argv + ["--resume"])
    assert len(calls) == 4  # nothing retrained
    out = json.loads((tmp_path / "a.json").read_text())
    assert [r["dev_bleu"] for r in out["runs"]] == [1.25, 1.25]
    with pytest.raises(SystemExit, match="other options"):
        asynchronous.main(argv + ["--resume", "--n-push", "8"])
    assert json.loads((tmp_path / "a.json").read_text()) == out  # refused before any rewrite
    assert out["runs"][0]["options"][:4] == ["--workers", "4", "--k", "1"]
    assert out["runs"][0]["machine"]["cpus"] >= 1

    # another machine: the run directories are gone, the committed results file is there
    import shutil
    shutil.rmtree(tmp_path / "w")
    asynchronous.main(argv + ["--resume"])
    assert len(calls) == 4  # both runs reused from the results file
    again = json.loads((tmp_path / "a.json").read_text())
    assert again["runs"] == out["runs"] and again["complete"]
    asynchronous.main(argv + ["--resume", "--dev-limit", "50"])  # another evaluation: retrained
    assert calls[4:] == ["train-async", "evaluate"] * 2


def test_async_max_new_runs_spreads_a_grid_over_invocations(tmp_path, monkeypatch):
    """--max-new-runs trains that many unfinished runs and stops; --resume goes on, and the
    recorded command stays that of the whole grid."""
    calls = []

    def fake_tf_nmt(command, *argv):
        calls.append((command, argv[argv.index("--run-dir") + 1].split("/")[-1]))
        fake_run(tmp_path / "w", command, argv, bleu=0.75)

    monkeypatch.setattr(asynchronous.common, "run_tf_nmt", fake_tf_nmt)
    argv = ["--work-dir", str(tmp_path / "w"), "--output", str(tmp_path / "a.json"),
            "--kinds", "transformer,gnmt", "--lrs", "0.001", "--modes", "async,sync"]
    asynchronous.main(argv + ["--max-new-runs", "1"])
    first = json.loads((tmp_path / "a.json").read_text())
    assert [(r["kind"], r["mode"]) for r in first["runs"]] == [("transformer", "async")]
    assert not first["complete"] and first["planned_runs"] == 4
    assert "--max-new-runs" not in first["command"]
    asynchronous.main(argv + ["--resume", "--max-new-runs", "2"])
    second = json.loads((tmp_path / "a.json").read_text())
    assert [(r["kind"], r["mode"]) for r in second["runs"]] == [
        ("transformer", "async"), ("transformer", "sync"), ("gnmt", "async")]
    # what the grid cost over both invocations, not the second invocation's time alone
    assert second["wall_seconds"] == pytest.approx(sum(r["wall_seconds"] for r in second["runs"]))
    assert second["wall_seconds"] > first["wall_seconds"] > 0 and second["invocation_seconds"] >= 0
    asynchronous.main(argv + ["--resume"])
    assert json.loads((tmp_path / "a.json").read_text())["complete"]
    assert [c for c in calls if c[0] == "train-async"] == [
        ("train-async", f"{k}-lr0.001-{m}") for k, m in
        [("transformer", "async"), ("transformer", "sync"), ("gnmt", "async"), ("gnmt", "sync")]]
    with pytest.raises(SystemExit):
        asynchronous.main(argv + ["--resume", "--max-new-runs", "0"])


def test_async_writes_the_results_after_every_run(tmp_path, monkeypatch):
    """A grid cut after its first run (the session ends) keeps that run in the results file."""
    def fake_tf_nmt(command, *argv):
        if command == "train-async" and "lr0.002" in argv[argv.index("--run-dir") + 1]:
            seen = json.loads((tmp_path / "a.json").read_text())
            assert [r["lr"] for r in seen["runs"]] == [0.001] and not seen["complete"]
            raise KeyboardInterrupt
        fake_run(tmp_path / "w", command, argv, bleu=0.5)

    monkeypatch.setattr(asynchronous.common, "run_tf_nmt", fake_tf_nmt)
    with pytest.raises(KeyboardInterrupt):
        asynchronous.main(["--work-dir", str(tmp_path / "w"), "--output", str(tmp_path / "a.json"),
                           "--kinds", "transformer", "--lrs", "0.001,0.002", "--modes", "async"])
    kept = json.loads((tmp_path / "a.json").read_text())
    assert kept["planned_runs"] == 2 and [r["dev_bleu"] for r in kept["runs"]] == [0.5]


@pytest.mark.parametrize("bad", [["--lrs", "0.001,fast"], ["--lrs", "0"], ["--kinds", "rnn"]])
def test_async_refuses_bad_grids_before_training(tmp_path, monkeypatch, bad):
    monkeypatch.setattr(asynchronous.common, "run_tf_nmt", lambda *a: pytest.fail("trained"))
    with pytest.raises(SystemExit):
        asynchronous.main(["--work-dir", str(tmp_path / "w"), "--output", str(tmp_path / "a.json"),
                           *bad])
    assert not (tmp_path / "a.json").exists()


def test_async_rows_and_table_mark_divergence():
    report = {"k": 2, "updates": 20, "pushes": 40, "final_loss": 5.5, "diverged": True,
              "mean": 0.5, "max": 2, "histogram": {"0": 10}, "seconds": 3.0,
              "losses": [6.0] * 39 + [float("nan")]}
    r = asynchronous.row("transformer", 0.002, "async+acc", 2, report, None, 4.0)
    assert r["staleness_max"] == 2 and r["dev_bleu"] is None
    assert "diverged" in asynchronous.table([r])
    assert [c["gradients"] for c in r["loss_by_gradients"]] == list(range(4, 41, 4))


def test_loss_by_gradients_means_each_tenth_of_the_run():
    curve = asynchronous.loss_by_gradients([float(i) for i in range(100)])
    assert [c["gradients"] for c in curve] == list(range(10, 101, 10))
    assert [c["loss"] for c in curve] == [4.5 + 10 * i for i in range(10)]
    short = asynchronous.loss_by_gradients([2.0, 4.0, 6.0])  # fewer losses than points
    assert short == [{"gradients": 1, "loss": 2.0}, {"gradients": 2, "loss": 4.0},
                     {"gradients": 3, "loss": 6.0}]
    assert asynchronous.loss_by_gradients([]) == []


def test_the_table_compares_runs_at_the_tenth_nearest_the_shortest_run():
    downpour = asynchronous.loss_by_gradients([5.0] * 2160 + [4.0] * 242)  # tenths end at 1,201
    assert [c["gradients"] for c in downpour][4] == 1201
    assert asynchronous.loss_at(downpour, 1200) == 5.0 and asynchronous.loss_at([], 1200) is None
    assert asynchronous.loss_at([{"gradients": 10, "loss": 1.0}, {"gradients": 20, "loss": 2.0}],
                                15) == 1.0  # as near: the earlier
    runs = []
    for mode, losses in (("async", [6.0] * 1200), ("downpour", [5.5] * 1201 + [3.0] * 1201)):
        report = {"k": 1, "updates": 1200, "pushes": 1200, "final_loss": losses[-1],
                  "diverged": False, "mean": 1.0, "max": 2, "histogram": {"1": 1}, "seconds": 1.0,
                  "losses": losses}
        runs.append(asynchronous.row("transformer", 0.001, mode, 2, report, 1.0, 2.0))
    lines = asynchronous.table(runs).splitlines()
    assert "loss@1200g" in lines[0]
    assert lines[2].split()[5] == "5.5000"  # Downpour at its 1,201-gradient tenth


def test_hvd_vs_single_gives_both_runs_the_same_tokens_and_schedule():
    args = hvd_vs_single.build_parser().parse_args(["--steps", "10", "--np", "2",
                                                    "--batch-tokens", "1000"])
    runs = hvd_vs_single.run_settings(args)
    assert runs["single"][0] == 1 and runs["hvd2"][0] == 2
    assert "data.batch_tokens=2000" in runs["single"][1]
    assert runs["hvd2"][1][-1] == "train.scale_lr_with_workers=false"
    scaled = hvd_vs_single.run_settings(hvd_vs_single.build_parser().parse_args(
        ["--steps", "10", "--scale-lr", "--preset", "quickstart"]))
    t = load_config(overrides=scaled["single"][1]).train  # quickstart: 2e-3, warm-up 300
    assert t.peak_lr == 0.004 and t.warmup_steps == 150
