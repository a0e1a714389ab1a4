"""Comm callbacks in one process: which ones each mode gets, periodic sync timing, statistics."""
import json

import numpy as np
import pytest

from tf_nmt.compat import keras
from tests.helpers import plain_sgd
from tf_nmt.distributed import SINGLE
from tf_nmt.distributed.comm import CommSettings, comm_callbacks, wrap_optimizer
from tf_nmt.distributed.comm.callbacks import CommStats, PeriodicSync, TensorKept
from tf_nmt.distributed.comm.optimizer import exchange_of

pytestmark = pytest.mark.keras2  # also in CI's Keras 2 pass


class Recorder(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.logs = []

    def on_train_batch_end(self, batch, logs=None):
        self.logs.append(dict(logs or {}))


def fit(settings, callbacks, steps=6, steps_per_execution=1):
    keras.utils.set_random_seed(1)
    m = keras.Sequential([keras.layers.Dense(3, input_shape=(5,))])
    m.compile(optimizer=wrap_optimizer(plain_sgd(0.1), settings, SINGLE), loss="mse",
              steps_per_execution=steps_per_execution)
    rng = np.random.default_rng(0)
    m.fit(rng.normal(size=(4 * steps, 5)), rng.normal(size=(4 * steps, 3)), batch_size=4,
          shuffle=False, verbose=0, callbacks=callbacks)
    return m


@pytest.mark.parametrize("mode, kinds", [
    ("sparse_as_dense", ["CommStats"]), ("dense", ["CommStats"]), ("graddrop", ["CommStats"]),
    ("fedavg", ["PeriodicSync", "CommStats"]), ("bmuf", ["PeriodicSync", "CommStats"])])
def test_single_process_callbacks_per_mode(mode, kinds):
    assert [type(c).__name__ for c in comm_callbacks(CommSettings(mode=mode), SINGLE)] == kinds


def test_periodic_sync_every_p_steps_and_at_the_end():
    sync = PeriodicSync(SINGLE, every=4)
    fit(CommSettings(mode="fedavg"), [sync], steps=6)
    assert sync.syncs == 2  # after step 4, and the final one at step 6


def test_stats_for_periodic_averaging_amortise_the_parameter_bytes(tmp_path):
    settings = CommSettings(mode="fedavg", average_every=3)
    callbacks = comm_callbacks(settings, SINGLE, log_every=3, log=lambda _m: None,
                               stats_path=tmp_path / "stats.json")
    recorder = Recorder()
    fit(settings, callbacks + [recorder], steps=6)
    param_bytes = 4 * (5 * 3 + 3)
    assert [r["comm_bytes"] for r in recorder.logs] == [0, 0, param_bytes, 0, 0, param_bytes]
    summary = json.loads((tmp_path / "stats.json").read_text())
    assert summary["sent_bytes_per_step"] == pytest.approx(param_bytes / 3)
    assert summary["reduction"] == pytest.approx(3.0) and summary["syncs"] == 2


def test_stats_for_graddrop_come_from_the_exchange():
    settings = CommSettings(mode="graddrop", drop_ratio=0.5, drop_warmup_steps=0)
    lines = []
    stats = CommStats("graddrop", exchange_of,
                      None, every=2, log=lines.append)
    recorder = Recorder()
    fit(settings, [stats, recorder], steps=4)
    assert len(stats.history) == 4 and len(lines) == 2 and "density of summed gradient" in lines[0]
    for entry in recorder.logs:
        assert 0 < entry["comm_density"] < 1 and entry["comm_bytes"] < entry["comm_dense_bytes"]


def test_graddrop_stats_file_has_what_each_tensor_kept(tmp_path):
    settings = CommSettings(mode="graddrop", drop_ratio=0.5, drop_warmup_steps=2)
    path = tmp_path / "stats.json"
    fit(settings, comm_callbacks(settings, SINGLE, log=lambda _m: None, stats_path=path), steps=5)
    summary = json.loads(path.read_text())["per_tensor"]
    assert summary["steps"] == 5 and summary["steps_after_warmup"] == 3  # steps 3, 4, 5
    rows = {r["name"].split("/")[-1]: r for r in summary["tensors"]}
    # the variables' names without ":0", the same on both Keras versions
    assert {n: r["size"] for n, r in rows.items()} == {"kernel": 15, "bias": 3}
    kept = sum(r["kept"] for r in rows.values())
    per_step = json.loads(path.read_text())["per_step"]
    assert kept == sum(e["kept"] for e in per_step)  # the same entries, split by tensor
    for r in rows.values():
        assert 0 <= r["mean_kept_fraction_after_warmup"] <= 1
        assert r["kept_after_warmup"] <= r["kept"]


def test_tensor_kept_sums_survive_a_resume():
    kept = TensorKept({"names": ["a", "b"], "sizes": [10, 4]}, warmup_steps=1)
    for step, counts in ((1, [10, 4]), (2, [1, 0]), (3, [2, 0])):
        kept.add(step, counts)
    summary = kept.summary()
    rows = summary["tensors"]
    assert [r["kept"] for r in rows] == [13, 4] and [r["kept_after_warmup"] for r in rows] == [3, 0]
    assert [r["steps_with_none_after_warmup"] for r in rows] == [0, 2]
    assert rows[0]["mean_kept_fraction_after_warmup"] == pytest.approx(3 / 20)
    again = TensorKept.from_summary(json.loads(json.dumps(summary)))
    again.add(4, [1, 1])
    assert [r["kept"] for r in again.summary()["tensors"]] == [14, 5]
    assert again.summary()["steps_after_warmup"] == 3
    assert again.matches({"names": ["a", "b"], "sizes": [10, 4]})
    assert not again.matches({"names": ["a", "c"], "sizes": [10, 4]})


def test_dense_modes_report_the_dense_allreduce_bytes():
    recorder = Recorder()
    fit(CommSettings(mode="sparse_as_dense"),
        comm_callbacks(CommSettings(mode="sparse_as_dense"), SINGLE, log=lambda _m: None) + [recorder])
    assert {r["comm_bytes"] for r in recorder.logs} == {4 * 18} and recorder.logs[0]["comm_density"] == 1


def test_single_process_dense_modes_print_no_traffic_line():
    lines = []
    settings = CommSettings(mode="sparse_as_dense")
    fit(settings, comm_callbacks(settings, SINGLE, log_every=1, log=lines.append))
    assert lines == []  # one process sends nothing; the series is still recorded (test above)


def test_resumed_run_keeps_the_earlier_steps_in_the_stats_file(tmp_path):
    settings = CommSettings(mode="fedavg", average_every=3)
    path = tmp_path / "stats.json"
    path.write_text(json.dumps({"per_step": [{"step": 0, "sent_bytes": 5.0, "density": 0.0,
                                              "dense_bytes": 72.0},
                                             {"step": 9, "sent_bytes": 7.0, "density": 0.0,
                                              "dense_bytes": 72.0}]}))
    callbacks = comm_callbacks(settings, SINGLE, log=lambda _m: None, stats_path=path)
    fit(settings, callbacks, steps=2)  # a fresh model: iterations start at 0
    steps = [e["step"] for e in json.loads(path.read_text())["per_step"]]
    assert steps == [0, 1, 2]  # step 9 was after the resume point; 0 kept, then the new ones


def test_dense_stats_keep_one_entry_per_step_with_several_steps_per_call(tmp_path):
    settings = CommSettings(mode="sparse_as_dense")
    lines = []
    stats = CommStats("sparse_as_dense", exchange_of, None, every=4, log=lines.append,
                      out_path=tmp_path / "stats.json", world_size=2)
    fit(settings, [stats], steps=12, steps_per_execution=3)  # calls end at steps 3, 6, 9, 12
    per_step = json.loads((tmp_path / "stats.json").read_text())["per_step"]
    assert [e["step"] for e in per_step] == list(range(1, 13))
    assert {e["sent_bytes"] for e in per_step} == {4 * 18}
    assert [line.split(":")[0] for line in lines] == [  # past steps 4, 8 and 12
        "comm sparse_as_dense step 6", "comm sparse_as_dense step 9", "comm sparse_as_dense step 12"]
