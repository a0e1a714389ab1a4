"""The async and Horovod-vs-one-process studies: the runs they launch, and their tables."""
from tf_nmt.config import load_config
from tf_nmt.studies import asynchronous, hvd_vs_single


def test_async_modes_and_overrides():
    assert asynchronous.mode_args("sync", 4, 3) == ["--k", "4", "--synchronous"]
    assert asynchronous.mode_args("async", 4, 3) == ["--k", "1"]
    assert asynchronous.mode_args("sync+stale", 4, 3)[-2:] == ["--refresh-every", "3"]
    overrides = asynchronous.run_overrides("gnmt", 0.001, 20, True, ["train.seed=2"])
    cfg = load_config(overrides=overrides)
    assert cfg.model.kind == "gnmt" and cfg.train.schedule == "constant"
    assert cfg.train.peak_lr == 0.001 and cfg.train.train_steps == 20 and cfg.train.seed == 2


def test_async_rows_and_table_mark_divergence():
    report = {"k": 2, "updates": 20, "pushes": 40, "final_loss": 5.5, "diverged": True,
              "mean": 0.5, "max": 2, "histogram": {"0": 10}, "seconds": 3.0}
    r = asynchronous.row("transformer", 0.002, "async+acc", 2, report, None, 4.0)
    assert r["staleness_max"] == 2 and r["dev_bleu"] is None
    assert "diverged" in asynchronous.table([r])


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
