"""The compression study: argument checks, names (current and earlier), resume, summary from
the progress log (no training here)."""
import json

import pytest

from experiments.compression import study as exp


def test_arguments_are_checked(tmp_path):
    args = exp.parse_args(["--modes", "sparse_as_dense,bmuf", "--models", "gnmt", "--results",
                           str(tmp_path / "r.json"), "--plot", str(tmp_path / "p.png")])
    assert args.modes == ["sparse_as_dense", "bmuf"] and args.models == ["gnmt"]
    with pytest.raises(SystemExit):
        exp.parse_args(["--modes", "topk"])
    with pytest.raises(SystemExit):  # the model kind is gnmt now
        exp.parse_args(["--models", "lstm"])
    with pytest.raises(SystemExit):
        exp.parse_args(["--eval-every", "300", "--average-every", "500"])
    existing = tmp_path / "exists.json"
    existing.write_text("{}")
    with pytest.raises(SystemExit):
        exp.parse_args(["--results", str(existing), "--plot", str(tmp_path / "p.png")])
    # --resume grows an existing grid: its results file is rewritten, not refused
    assert exp.parse_args(["--results", str(existing), "--plot", str(tmp_path / "p.png"),
                           "--resume"]).resume
    with pytest.raises(SystemExit):  # fedavg's period must also line up with the evaluations
        exp.parse_args(["--sync-every", "300", "--results", str(tmp_path / "r.json"),
                        "--plot", str(tmp_path / "p.png")])


def test_model_averaging_modes_have_their_own_period(tmp_path):
    common = ["--results", str(tmp_path / "r.json"), "--plot", str(tmp_path / "p.png")]
    args = exp.parse_args(["--sync-every", "20", "--average-every", "500", *common])
    assert "train.average_every=20" in exp.run_overrides(args, "transformer", "fedavg")
    assert "train.average_every=20" in exp.run_overrides(args, "transformer", "bmuf")
    assert "train.average_every=500" in exp.run_overrides(args, "transformer", "graddrop_local")
    default = exp.parse_args(common)
    assert "train.average_every=500" in exp.run_overrides(default, "transformer", "bmuf")


def test_an_option_no_listed_mode_reads_is_refused(tmp_path, capsys):
    common = ["--results", str(tmp_path / "r.json"), "--plot", str(tmp_path / "p.png")]
    for modes, option in (("sparse_as_dense,single", ["--drop-ratio", "0.9"]),
                          ("graddrop,fedavg", ["--average-every", "100", "--sync-every", "20"]),
                          ("graddrop_local", ["--sync-every", "20"]),
                          ("fedavg,bmuf", ["--drop-warmup", "200"])):
        with pytest.raises(SystemExit):
            exp.parse_args(["--modes", modes, *option, *common])
        assert f"{option[0]} is read by none of the modes {modes}" in capsys.readouterr().err
    # read by one listed mode: accepted; fedavg/bmuf fall back on --average-every
    args = exp.parse_args(["--modes", "sparse_as_dense,fedavg", "--average-every", "100", *common])
    assert "train.average_every=100" in exp.run_overrides(args, "transformer", "fedavg")
    args = exp.parse_args(["--modes", "graddrop_noef", "--drop-warmup", "0", *common])
    assert "train.drop_warmup_steps=0" in exp.run_overrides(args, "transformer", "graddrop_noef")
    # a period no listed mode reads need not line up with the evaluations
    assert exp.parse_args(["--modes", "graddrop", "--eval-every", "300", *common]).eval_every == 300


def test_no_time_budget_means_no_launch_timeout(tmp_path, monkeypatch):
    seen = {}

    def fake_run(script, cli, np, controller, threads, timeout):
        seen["timeout"] = timeout
        return "ok"

    monkeypatch.setattr(exp.launcher, "run", fake_run)
    for minutes, expected in (("0", None), ("40", 40 * 60 * 3 + 900)):
        args = exp.parse_args(["--minutes", minutes, "--out-dir", str(tmp_path / minutes),
                               "--results", str(tmp_path / "r.json"),
                               "--plot", str(tmp_path / "p.png")])
        exp.train_run(args, "transformer", "graddrop", tmp_path / minutes / "run")
        assert seen["timeout"] == expected


def test_threads_per_rank_reach_the_launch(tmp_path, monkeypatch):
    seen = {}

    def fake_run(script, cli, np, controller, threads, timeout):
        seen[cli[2]] = (np, threads)
        return "ok"

    monkeypatch.setattr(exp.launcher, "run", fake_run)
    monkeypatch.setattr(exp.common, "prepare_data", lambda data_dir, vocab_size: None)
    argv = ["--np", "4", "--threads", "3", "--minutes", "0", "--out-dir", str(tmp_path),
            "--results", str(tmp_path / "r.json"), "--plot", str(tmp_path / "p.png")]
    args = exp.parse_args(argv)
    for mode in ("graddrop", "single"):
        exp.train_run(args, "transformer", mode, tmp_path / mode)
    assert seen == {str(tmp_path / "graddrop"): (4, 3), str(tmp_path / "single"): (1, 12)}
    assert exp.parse_args(argv[:2] + argv[4:]).threads == 1  # the 2-core default
    with pytest.raises(SystemExit):
        exp.parse_args(argv[:2] + ["--threads", "0"] + argv[4:])


def test_every_variant_is_a_valid_config():
    from tf_nmt.config import load_config
    from tf_nmt.distributed.comm import resolve_comm

    for name, overrides in exp.VARIANTS.items():
        mode = resolve_comm(load_config(overrides=overrides).train).mode
        expected = {"single": "sparse_as_dense", "sparse_as_dense": "sparse_as_dense",
                    "dense": "dense"}.get(name, name.split("_")[0])
        assert mode == expected, name
    assert exp.BASELINE in exp.DEFAULT_MODES.split(",") and "dense" not in exp.DEFAULT_MODES.split(",")


def test_single_reference_does_what_the_ranks_do_together(tmp_path):
    args = exp.parse_args(["--np", "2", "--set", "data.batch_tokens=2048", "--results",
                           str(tmp_path / "r.json"), "--plot", str(tmp_path / "p.png")])
    single = exp.run_overrides(args, "transformer", "single")
    # quickstart: peak 2e-3, warm-up 300; the trainer's rule for 2 workers: 4e-3, 150
    assert single[-4:] == ["data.batch_tokens=4096", "train.peak_lr=0.004",
                           "train.warmup_steps=150", "train.scale_lr_with_workers=false"]
    args.set.append("train.scale_lr_with_workers=false")
    assert exp.run_overrides(args, "transformer", "single")[-4:-1] == [
        "data.batch_tokens=4096", "train.peak_lr=0.002", "train.warmup_steps=300"]
    assert not any(o.startswith("data.batch_tokens=4096") for o in exp.run_overrides(args, "transformer", "sparse_as_dense"))


def test_resume_reuses_only_a_finished_run_with_the_same_settings(tmp_path):
    argv = ["--results", str(tmp_path / "r.json"), "--plot", str(tmp_path / "p.png"),
            "--out-dir", str(tmp_path)]
    args = exp.parse_args(argv + ["--resume", "--steps", "40"])
    run_dir = tmp_path / "transformer-sparse_as_dense"
    run_dir.mkdir()
    with pytest.raises(SystemExit, match="unfinished"):  # no record: never trained to the end
        exp.train_run(exp.parse_args(argv + ["--steps", "40"]), "transformer", "sparse_as_dense",
                      run_dir)
    record = {"overrides": exp.run_overrides(args, "transformer", "sparse_as_dense"),
              "launched": 1.0, "wall_seconds": 2.0, "stdout": ""}
    (run_dir / exp.RUN_RECORD).write_text(json.dumps(record))
    assert exp.train_run(args, "transformer", "sparse_as_dense", run_dir) == {
        **record, "run_dir": str(run_dir)}
    with pytest.raises(SystemExit, match="other settings"):
        exp.train_run(exp.parse_args(argv + ["--resume", "--steps", "80"]), "transformer",
                      "sparse_as_dense", run_dir)
    with pytest.raises(SystemExit):
        exp.parse_args(argv + ["--resume", "--overwrite"])


def test_resume_reuses_a_run_of_the_earlier_naming(tmp_path):
    """Runs of the earlier names (variant "dense" = sparse_as_dense, model "lstm" = gnmt) are
    found and reused; a package-"dense" (allgather) run is never mistaken for one."""
    argv = ["--results", str(tmp_path / "r.json"), "--plot", str(tmp_path / "p.png"),
            "--out-dir", str(tmp_path), "--resume", "--steps", "40"]
    args = exp.parse_args(argv)
    old = tmp_path / "lstm-dense"
    old.mkdir()
    record = {"overrides": exp.run_overrides(args, "gnmt", "sparse_as_dense"), "launched": 1.0,
              "wall_seconds": 2.0, "stdout": ""}
    (old / exp.RUN_RECORD).write_text(json.dumps(record))
    assert exp.run_dirs(tmp_path, "gnmt", "sparse_as_dense")[-1] == old
    reused = exp.train_run(args, "gnmt", "sparse_as_dense", tmp_path / "gnmt-sparse_as_dense")
    assert reused["run_dir"] == str(old)
    # "dense" now names the allgathering mode: the old sparse_as_dense run does not stand in
    assert exp.finished_run(args, "gnmt", "dense") is None


def test_resume_continues_an_interrupted_run_in_place(tmp_path, monkeypatch):
    launched = []
    monkeypatch.setattr(exp.launcher, "run",
                        lambda script, cli, **kw: launched.append(cli) or "trained")
    argv = ["--results", str(tmp_path / "r.json"), "--plot", str(tmp_path / "p.png"),
            "--out-dir", str(tmp_path), "--steps", "40"]
    run_dir = tmp_path / "gnmt-bmuf"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "ckpt-20.index").write_text("")  # what the killed run left
    record = exp.train_run(exp.parse_args(argv + ["--resume"]), "gnmt", "bmuf", run_dir)
    assert (run_dir / "checkpoints" / "ckpt-20.index").exists()  # kept: train resumes from it
    assert launched and launched[0][launched[0].index("--run-dir") + 1] == str(run_dir)
    assert record["interrupted"] and record["launched"] is None and record["wall_seconds"] is None
    assert json.loads((run_dir / exp.RUN_RECORD).read_text())["interrupted"]
    # the record now marks it finished: a second --resume reuses it instead of training again
    exp.train_run(exp.parse_args(argv + ["--resume"]), "gnmt", "bmuf", run_dir)
    assert len(launched) == 1
    run = {"wall_seconds": None, "interrupted": True}
    row = exp.summarise("gnmt", "bmuf", run, [{"step": 20, "bleu": 1.0}], {}, 1, [])
    assert row["interrupted"] and row["wall_seconds"] is None
    exp.time_to_threshold([row], 0.5)  # no wall time: steps only
    assert row["steps_to_threshold"] == 20 and row["seconds_to_threshold"] is None
    exp.plot([row], tmp_path / "p.png")


def test_results_of_the_earlier_naming_are_translated():
    sad = ["train.comm=sparse_as_dense", "train.train_steps=40"]
    old = {"setting": {"models": ["lstm"], "modes": ["dense", "graddrop_local", "single"]},
           "runs": [{"model": "lstm", "mode": "dense", "overrides": sad},
                    {"model": "lstm", "mode": "graddrop_local", "overrides": ["train.comm=graddrop"]},
                    {"model": "lstm", "mode": "single", "overrides": sad}],
           "against_single": [{"model": "lstm", "mode": "dense", "bleu_minus_single": {"500": 0.1}}]}
    new = exp.translate_results(old)
    assert [(r["model"], r["mode"]) for r in new["runs"]] == [
        ("gnmt", "sparse_as_dense"), ("gnmt", "graddrop_local"), ("gnmt", "single")]
    assert new["setting"] == {"models": ["gnmt"], "modes": ["sparse_as_dense", "graddrop_local", "single"]}
    assert new["against_single"] == [{"model": "gnmt", "mode": "sparse_as_dense",
                                      "bleu_minus_single": {"500": 0.1}}]
    assert exp.translate_results(new) == new  # current names stay
    dense = {"runs": [{"model": "gnmt", "mode": "dense", "overrides": ["train.comm=dense"]}]}
    assert exp.translate_results(dense)["runs"][0]["mode"] == "dense"


def test_against_single_compares_at_the_shared_steps():
    runs = [{"model": "transformer", "mode": "single", "curve": [{"step": 500, "bleu": 4.0},
                                                                  {"step": 1000, "bleu": 6.0}]},
            {"model": "transformer", "mode": "sparse_as_dense", "curve": [{"step": 500, "bleu": 3.5},
                                                                 {"step": 1000, "bleu": 6.25}]},
            {"model": "transformer", "mode": "graddrop", "curve": [{"step": 500, "bleu": 1.0}]}]
    rows = exp.against_single(runs)
    assert rows == [{"model": "transformer", "mode": "sparse_as_dense", "bleu_minus_single": {500: -0.5, 1000: 0.25}},
                    {"model": "transformer", "mode": "graddrop", "bleu_minus_single": {500: -3.0}}]
    assert exp.against_single(runs[1:]) == []


def test_summary_from_the_progress_log_and_threshold():
    progress = [{"step": 20, "loss": 7.1, "tokens_per_s": 3000.0},
                {"step": 40, "loss": 6.5, "tokens_per_s": 5000.0}]
    stats = {"sent_bytes_per_step": 10.0, "dense_bytes_per_step": 1000, "reduction": 100.0,
             "mean_density": 0.02, "per_step": [{"step": 1, "sent_bytes": 100}, {"step": 2, "sent_bytes": 10}]}
    curve = [{"step": 20, "seconds": 60.0, "bleu": 3.0}, {"step": 40, "seconds": 120.0, "bleu": 9.0}]
    run = {"wall_seconds": 130.0}
    base = exp.summarise("transformer", "sparse_as_dense", run, curve, stats, 1, progress)
    gd = exp.summarise("transformer", "graddrop", run, curve[:1], stats, 1, progress)
    assert base["final_bleu"] == 9.0 and base["tgt_words_per_s"] == 5000  # first window skipped
    assert base["loss"] == [{"step": 20, "loss": 7.1}, {"step": 40, "loss": 6.5}]
    assert base["bytes_per_step_after_drop_warmup"] == 10
    assert exp.summarise("transformer", "bmuf", run, [], {}, 1, [])["tgt_words_per_s"] is None
    exp.time_to_threshold([base, gd], 0.0)
    assert base["bleu_threshold"] == pytest.approx(8.1)  # 90% of the best sparse_as_dense BLEU
    assert base["seconds_to_threshold"] == 120.0 and gd["seconds_to_threshold"] is None
    assert "graddrop" in exp.table([base, gd])
    assert base["kept_fraction_by_tensor"] is None  # no per-tensor statistics in this file
    per_tensor = {"tensors": [{"name": "enc/kernel:0", "mean_kept_fraction_after_warmup": 0.02},
                              {"name": "dec/bias:0", "mean_kept_fraction_after_warmup": 0.0}]}
    gd = exp.summarise("gnmt", "graddrop", run, curve, {**stats, "per_tensor": per_tensor}, 1,
                       progress)
    assert gd["kept_fraction_by_tensor"] == {"enc/kernel:0": 0.02, "dec/bias:0": 0.0}


def test_plot_gives_each_mode_one_colour_in_every_panel(tmp_path, monkeypatch):
    """A run without wall times is left out of the time panel; the colours must not shift."""
    drawn = []
    real_plot = exp.subplots

    def recording_subplots(*a, **kw):
        fig, axes = real_plot(*a, **kw)
        for ax in axes.ravel():
            original = ax.plot
            ax.plot = lambda *p, _o=original, _ax=ax, **k: (drawn.append((id(_ax), k["label"],
                                                                         k["color"])), _o(*p, **k))[1]
        return fig, axes

    monkeypatch.setattr(exp, "subplots", recording_subplots)
    curve = [{"step": 10, "bleu": 1.0, "seconds": 6.0}, {"step": 20, "bleu": 2.0, "seconds": 12.0}]
    runs = [{"model": "transformer", "mode": "sparse_as_dense", "curve": [{"step": 10, "bleu": 1.0}]},
            {"model": "transformer", "mode": "graddrop", "curve": curve},
            {"model": "gnmt", "mode": "graddrop", "curve": curve}]
    exp.plot(runs, tmp_path / "p.png")
    assert (tmp_path / "p.png").is_file()
    colour = {}
    for _ax, mode, c in drawn:
        assert colour.setdefault(mode, c) == c
    assert colour["sparse_as_dense"] != colour["graddrop"] and len(drawn) == 5


def test_the_study_reads_what_the_trainer_logs(tmp_path):
    """The progress entries the study summarises are the trainer's JSONL log, read back."""
    from tf_nmt.training.callbacks import PROGRESS_LOG, read_progress_log

    (tmp_path / PROGRESS_LOG).write_text("".join(json.dumps(e) + "\n" for e in [
        {"step": 50, "loss": 6.0, "tokens_per_s": 100.0}, {"step": 100, "loss": 5.0, "tokens_per_s": 300.0}]))
    row = exp.summarise("transformer", "fedavg", {"wall_seconds": 1.0}, [], {}, 0,
                        read_progress_log(tmp_path / PROGRESS_LOG))
    assert row["tgt_words_per_s"] == 300.0 and [p["step"] for p in row["loss"]] == [50, 100]


def test_against_thesis_puts_the_thesis_figures_beside_ours():
    runs = [{"model": "transformer", "mode": "sparse_as_dense", "final_step": 2000, "final_bleu": 6.5},
            {"model": "transformer", "mode": "graddrop", "final_step": 2000, "final_bleu": 6.0},
            {"model": "transformer", "mode": "bmuf", "final_step": 2000, "final_bleu": None}]
    rows = {r["mode"]: r for r in exp.against_thesis(runs)}
    assert rows["graddrop"]["bleu_minus_baseline"] == -0.5
    assert rows["graddrop"]["thesis_bleu"] == 0.0  # the thesis's Transformer failed here
    assert rows["graddrop"]["thesis_minus_baseline"] == pytest.approx(-35.39)
    assert rows["sparse_as_dense"]["bleu_minus_baseline"] == 0.0
    assert rows["bmuf"]["thesis_bleu"] is None and rows["bmuf"]["bleu_minus_baseline"] is None


def test_steps_for_every_model_or_per_model(tmp_path):
    common = ["--results", str(tmp_path / "r.json"), "--plot", str(tmp_path / "p.png")]
    args = exp.parse_args(["--steps", "transformer=2000,gnmt=4000", *common])
    assert args.steps == {"transformer": 2000, "gnmt": 4000}
    assert "train.train_steps=4000" in exp.run_overrides(args, "gnmt", "bmuf")
    assert "train.train_steps=2000" in exp.run_overrides(args, "transformer", "bmuf")
    assert exp.parse_args(["--steps", "300", *common]).steps == {"transformer": 300, "gnmt": 300}
    for bad in ("transformer=2000", "lstm=5,transformer=5,gnmt=5", "0", "gnmt=x,transformer=1"):
        with pytest.raises(SystemExit):
            exp.parse_args(["--steps", bad, *common])


def test_results_are_written_after_every_run(tmp_path, monkeypatch):
    """A grid stopped during a run keeps the results of the runs before it."""
    stats = {"sent_bytes_per_step": 10.0, "dense_bytes_per_step": 1000, "reduction": 100.0,
             "mean_density": 0.02, "per_step": [{"step": 1, "sent_bytes": 10}]}
    curve = [{"step": 20, "seconds": 60.0, "bleu": 3.0}]

    def fake_measure(args, model, mode):
        if mode == "bmuf":
            raise KeyboardInterrupt
        return exp.summarise(model, mode, {"wall_seconds": 70.0}, curve, stats, 1,
                             [{"step": 20, "loss": 7.0, "tokens_per_s": 100.0}])

    monkeypatch.setattr(exp, "measure", fake_measure)
    results, plot = tmp_path / "r.json", tmp_path / "p.png"
    with pytest.raises(KeyboardInterrupt):
        exp.main(["--models", "transformer", "--modes", "sparse_as_dense,graddrop,bmuf",
                  "--results", str(results), "--plot", str(plot)])
    written = json.loads(results.read_text())
    assert [r["mode"] for r in written["runs"]] == ["sparse_as_dense", "graddrop"]
    assert written["command"].startswith("python -m experiments compression --models transformer --modes ")
    assert plot.is_file()


def _fake_run(model, mode, bleu):
    stats = {"sent_bytes_per_step": 10.0, "dense_bytes_per_step": 1000, "reduction": 100.0,
             "mean_density": 0.02, "per_step": [{"step": 1, "sent_bytes": 10}]}
    return exp.summarise(model, mode, {"wall_seconds": 70.0},
                         [{"step": 20, "seconds": 60.0, "bleu": bleu}], stats, 1,
                         [{"step": 20, "loss": 7.0, "tokens_per_s": 100.0}])


def test_update_grows_one_file_and_each_run_keeps_its_command(tmp_path, monkeypatch):
    """A grid spread over invocations: --update keeps the runs it does not measure, --merge folds
    in another results file, and every run says which command measured it."""
    results, other, plot = tmp_path / "r.json", tmp_path / "single.json", tmp_path / "p.png"
    # the older layout: one command at the top for all runs
    results.write_text(json.dumps({"command": "cmd-grid", "setting": {"np": 2}, "runs": [
        _fake_run("transformer", "sparse_as_dense", 5.0), _fake_run("transformer", "graddrop", 4.0)]}))
    other.write_text(json.dumps({"command": "cmd-single", "setting": {"np": 2},
                                 "runs": [_fake_run("transformer", "single", 6.0)]}))
    measured = []

    def fake_measure(args, model, mode):
        measured.append((model, mode))
        if mode == "bmuf":
            raise KeyboardInterrupt
        return _fake_run(model, mode, 3.5)

    monkeypatch.setattr(exp, "measure", fake_measure)
    with pytest.raises(KeyboardInterrupt):  # stopped in its second run
        exp.main(["--models", "transformer", "--modes", "graddrop,bmuf", "--update",
                  "--merge", str(other), "--results", str(results), "--plot", str(plot)])
    written = json.loads(results.read_text())
    runs = {(r["model"], r["mode"]): r for r in written["runs"]}
    assert list(runs) == [("transformer", "sparse_as_dense"), ("transformer", "graddrop"),
                          ("transformer", "single")]  # re-measured graddrop replaced in place
    assert runs[("transformer", "sparse_as_dense")]["command"] == "cmd-grid"
    assert runs[("transformer", "single")]["command"] == "cmd-single"
    assert runs[("transformer", "graddrop")]["final_bleu"] == 3.5
    assert runs[("transformer", "graddrop")]["command"].startswith(
        "python -m experiments compression --models transformer --modes graddrop,bmuf --update")
    assert "cpus" in runs[("transformer", "graddrop")]["machine"]
    assert {(r["mode"], r["bleu_minus_single"]["20"]) for r in written["against_single"]} == {
        ("sparse_as_dense", -1.0), ("graddrop", -2.5)}
    # a later invocation adds a model; nothing earlier is lost
    monkeypatch.setattr(exp, "measure", lambda args, model, mode: _fake_run(model, mode, 2.0))
    exp.main(["--models", "gnmt", "--modes", "sparse_as_dense", "--update",
              "--results", str(results), "--plot", str(plot)])
    written = json.loads(results.read_text())
    assert [(r["model"], r["mode"]) for r in written["runs"]] == [
        ("transformer", "sparse_as_dense"), ("transformer", "graddrop"), ("transformer", "single"),
        ("gnmt", "sparse_as_dense")]
    commands = [r["command"] for r in written["runs"]]
    assert commands[0] == "cmd-grid" and commands[2] == "cmd-single"
    assert "--modes graddrop,bmuf" in commands[1] and "--models gnmt" in commands[3]


def test_update_stopped_before_its_first_run_leaves_the_file_alone(tmp_path, monkeypatch):
    """--update rewrites the results file only once it has measured something (or for a pure
    --merge): a grid stopped in its first run leaves the file byte for byte as it was."""
    results, plot = tmp_path / "r.json", tmp_path / "p.png"
    results.write_text(json.dumps({"command": "cmd-grid", "setting": {"np": 2},
                                   "runs": [_fake_run("gnmt", "sparse_as_dense", 2.0)]}))
    before = results.read_bytes()

    def stopped(args, model, mode):
        raise KeyboardInterrupt

    monkeypatch.setattr(exp, "measure", stopped)
    with pytest.raises(KeyboardInterrupt):
        exp.main(["--models", "gnmt", "--modes", "graddrop", "--update",
                  "--results", str(results), "--plot", str(plot)])
    assert results.read_bytes() == before and not plot.exists()
    # a pure --merge (nothing to measure) still rewrites at once, runs keeping their own command
    exp.main(["--models", "gnmt", "--modes", "", "--update", "--results", str(results),
              "--plot", str(plot)])
    written = json.loads(results.read_text())
    assert written["runs"][0]["command"] == "cmd-grid" and plot.is_file()
    assert "--modes" in written["command"]


def test_update_and_merge_are_checked(tmp_path):
    results, other, plot = tmp_path / "r.json", tmp_path / "o.json", tmp_path / "p.png"
    common = ["--results", str(results), "--plot", str(plot)]
    with pytest.raises(SystemExit):  # nothing to grow
        exp.parse_args(["--update", *common])
    results.write_text(json.dumps({"runs": [_fake_run("gnmt", "fedavg", 1.0)]}))
    with pytest.raises(SystemExit):
        exp.parse_args(["--update", "--overwrite", *common])
    with pytest.raises(SystemExit):  # --merge without --update would be ignored
        exp.parse_args(["--merge", str(results), "--resume", *common])
    with pytest.raises(SystemExit):
        exp.parse_args(["--update", "--merge", str(other), *common])
    other.write_text(json.dumps({"runs": [_fake_run("gnmt", "fedavg", 2.0)]}))
    args = exp.parse_args(["--update", "--merge", str(other), "--modes", "", *common])
    with pytest.raises(SystemExit, match="gnmt / fedavg is in both"):
        exp.kept_runs(args)
    assert json.loads(results.read_text())["runs"][0]["final_bleu"] == 1.0  # untouched
