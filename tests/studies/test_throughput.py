"""The throughput study's analysis and the shared compute/communication split."""
import pytest

from experiments.lib import common
from experiments.throughput import study as throughput
from experiments.lib.step_split import StepSplit


def test_step_split_clamps_communication_at_zero():
    split = StepSplit(step_s=2.0, compute_s=1.5)
    assert (split.comm_s, split.comm_s_raw, split.comm_share) == (0.5, 0.5, 0.25)
    noisy = StepSplit(step_s=1.0, compute_s=1.2)
    assert noisy.comm_s == 0.0 and noisy.comm_s_raw == pytest.approx(-0.2)
    assert StepSplit(0.0, 0.0).comm_share is None


def test_summary_takes_the_slowest_rank_per_step_and_median_compute():
    ranks = [{"distributed_s": [1.0, 3.0, 2.0], "compute_s": [0.5, 0.7, 0.6],
              "target_tokens": [100, 200, 300]},
             {"distributed_s": [1.5, 2.0, 2.5], "compute_s": [0.4, 0.4, 0.4],
              "target_tokens": [300, 300, 300]}]
    row = throughput.summarise(ranks, timeline_path=None)
    # per-step maxima 1.5, 3.0, 2.5 -> median 2.5; compute medians 0.6, 0.4 -> median 0.5
    assert row["step_s"] == 2.5 and row["compute_s"] == pytest.approx(0.5)
    assert row["comm_direct_s"] == pytest.approx(2.0) and row["comm_share"] == pytest.approx(0.8)
    assert row["tokens_per_s_total"] == pytest.approx((200 + 300) / 2.5)
    assert "comm_timeline_s" not in row


def test_speedups_are_relative_to_the_first_row_and_the_table_lists_them():
    rows = throughput.with_speedups([
        {"ranks": 1, "step_s": 1.0, "compute_s": 1.0, "comm_direct_s": 0.0, "comm_share": 0.0,
         "tokens_per_s_per_rank": 100.0, "tokens_per_s_total": 100.0},
        {"ranks": 2, "step_s": 1.6, "compute_s": 1.0, "comm_direct_s": 0.6, "comm_share": 0.375,
         "tokens_per_s_per_rank": 75.0, "tokens_per_s_total": 150.0, "comm_timeline_s": 0.5}])
    assert [r["total_speedup_vs_first"] for r in rows] == [1.0, 1.5]
    text = throughput.table({"batch_tokens": 5000, "preset": "quickstart", "threads_per_rank": 1,
                             "rows": rows})
    assert "1.50x" in text and "0.500" in text and "38%" in text


def test_workers_are_launched_as_the_study_itself():
    args = throughput.build_parser().parse_args(["--set", "train.seed=3", "--steps", "2"])
    argv = common.worker_argv("throughput", args, "/tmp/x", "--warmup", "1")
    assert argv[:2] == ["throughput", "--worker"]
    parsed = throughput.build_parser().parse_args(argv[1:])
    assert parsed.worker and parsed.worker_out == "/tmp/x" and parsed.steps == 2
    assert parsed.warmup == 1
    assert parsed.set == ["train.seed=3"]
