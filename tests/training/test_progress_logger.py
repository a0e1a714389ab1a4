"""ProgressLogger's rate: measured target tokens, total over workers and per worker."""
import re

import numpy as np
import pytest

from tf_nmt.compat import keras, tf
from tf_nmt.models.losses import TokenCount
from tf_nmt.training.callbacks import ProgressLogger


def fit_with(logger, steps_per_execution=1):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.layers.Embedding(10, 4), keras.layers.Dense(10)])
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[TokenCount(name="tokens")], steps_per_execution=steps_per_execution)
    x = np.ones([8, 5], np.int32)
    y = np.array([[1, 2, 3, 0, 0]] * 8, np.int32)  # 3 non-pad target tokens per sentence
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=[logger])


def test_single_worker_line_has_no_per_rank_part():
    lines = []
    logger = ProgressLogger(2, 4, log=lines.append)
    fit_with(logger)
    assert len(lines) == 2 and "/rank" not in lines[0]
    entry = logger.history[0]
    assert entry["tokens_per_s"] == pytest.approx(entry["tokens_per_s_per_rank"])
    assert entry["tokens_per_s"] == pytest.approx(2 * 2 * 3 / (entry["s_per_step"] * 2))


def test_step_limit_line_shows_step_of_total():
    lines = []
    fit_with(ProgressLogger(2, 4, log=lines.append))
    assert [line.split(" | ")[0] for line in lines] == ["step      2/4", "step      4/4"]


def test_time_budgeted_line_shows_minutes_of_the_budget_not_the_step_cap():
    """A time-budgeted run (the quickstart: a huge step cap, the budget ends it) shows its
    training time against the budget; the cap is no target and is not shown."""
    lines = []
    fit_with(ProgressLogger(2, 1_000_000, log=lines.append, time_budget_minutes=45))
    assert len(lines) == 2
    for line, step in zip(lines, (2, 4)):
        where = line.split(" | ")[0]
        assert re.fullmatch(rf"step +{step}, \d+\.\d/45 min", where), line
        assert "1000000" not in line
    assert "/4.5 min" in _first(ProgressLogger(4, 10, log=None, time_budget_minutes=4.5))


def _first(logger):
    lines = []
    logger.log = lines.append
    fit_with(logger)
    return lines[0]


def test_several_steps_per_call_log_once_past_each_multiple():
    lines = []
    logger = ProgressLogger(3, 4, log=lines.append)
    fit_with(logger, steps_per_execution=2)  # calls end at steps 2 and 4
    assert [e["step"] for e in logger.history] == [4] and len(lines) == 1  # past 3, and the last
    entry = logger.history[0]
    assert entry["tokens_per_s"] == pytest.approx(4 * 2 * 3 / (4 * entry["s_per_step"]))


def test_total_sums_ranks_and_per_rank_divides():
    lines, seen = [], []

    def summed(local):  # stands in for an allreduce over 2 ranks: the other one saw 3x more
        seen.append(local)
        return 4 * local

    logger = ProgressLogger(2, 4, log=lines.append, world_size=2, sum_across_ranks=summed)
    fit_with(logger)
    assert seen == [12.0, 12.0]  # local tokens per logging window (2 steps x 2 sentences x 3)
    entry = logger.history[0]
    assert entry["tokens_per_s"] == pytest.approx(48 / (2 * entry["s_per_step"]))
    assert entry["tokens_per_s_per_rank"] == pytest.approx(entry["tokens_per_s"] / 2)
    assert f"{entry['tokens_per_s']:,.0f} tgt tok/s ({entry['tokens_per_s_per_rank']:,.0f}/rank)" in lines[0]


def test_without_sum_scales_local_count():
    logger = ProgressLogger(4, 4, log=lambda _m: None, world_size=3)
    fit_with(logger)
    entry = logger.history[0]
    assert entry["tokens_per_s"] == pytest.approx(3 * 4 * 2 * 3 / (4 * entry["s_per_step"]))


def test_jsonl_log_has_one_parsable_entry_per_logged_step(tmp_path):
    from tf_nmt.training.callbacks import read_progress_log

    path = tmp_path / "run" / "progress.jsonl"
    lines = []
    logger = ProgressLogger(2, 4, log=lines.append, jsonl_path=path)
    fit_with(logger)
    raw = path.read_text().splitlines()
    assert len(raw) == len(lines) == 2
    entries = read_progress_log(path)
    assert [e["step"] for e in entries] == [2, 4]
    for entry, seen in zip(entries, logger.history):
        assert entry["total_steps"] == 4 and entry["elapsed_s"] >= 0
        for key in ("loss", "lr", "tokens_per_s", "tokens_per_s_per_rank", "s_per_step", "time"):
            assert entry[key] == pytest.approx(seen[key])
    assert entries[1]["elapsed_s"] >= entries[0]["elapsed_s"]
    assert 0 < entries[0]["cpu_s"] <= entries[1]["cpu_s"]  # the process's CPU time since the start


def test_jsonl_log_continues_on_resume_and_drops_steps_past_the_restart(tmp_path):
    import json

    from tf_nmt.training.callbacks import read_progress_log

    path = tmp_path / "progress.jsonl"
    # an earlier invocation logged steps 2 and 6 (6: after the checkpoint at 4, then killed
    # while writing the next line)
    path.write_text(json.dumps({"step": 2, "loss": 1.0}) + "\n"
                    + json.dumps({"step": 6, "loss": 0.5}) + "\n" + '{"step": 8, "lo')

    class Resumed(ProgressLogger):  # the restored optimizer starts at step 4
        def on_train_begin(self, logs=None):
            self.model.optimizer.iterations.assign(4)
            super().on_train_begin(logs)

    logger = Resumed(2, 8, log=lambda _m: None, jsonl_path=path)
    fit_with(logger)
    assert [e["step"] for e in read_progress_log(path)] == [2, 6, 8]
    entries = read_progress_log(path)
    assert entries[0] == {"step": 2, "loss": 1.0}
    assert entries[1]["total_steps"] == 8 and entries[1]["loss"] != 0.5  # step 6 logged anew


def test_reading_rejects_a_malformed_line_that_is_not_the_last(tmp_path):
    from tf_nmt.training.callbacks import read_progress_log

    path = tmp_path / "progress.jsonl"
    path.write_text('{"step": 2}\nnot json\n{"step": 4}\n')
    with pytest.raises(ValueError, match=":2:"):
        read_progress_log(path)
    assert read_progress_log(tmp_path / "missing.jsonl") == []

