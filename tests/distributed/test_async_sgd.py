"""Asynchronous SGD on a real local parameter-server cluster (2 worker + 1 ps server processes
on 127.0.0.1, driven from a child process: see async_case.py): exact update counts under
concurrent pushes, staleness measured, loss falls."""
import json
import re
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.distributed.async_case import TRUE_W

pytestmark = pytest.mark.slow  # starts TensorFlow server processes

REPO = Path(__file__).resolve().parents[2]
CASES = [{"pushes": 40, "k": 1}, {"pushes": 40, "k": 2},
         {"pushes": 24, "k": 2, "synchronous": True, "refresh_every": 3},
         {"pushes": 30, "k": 1, "n_push": 3, "n_fetch": 1},
         {"pushes": 40, "k": 1, "n_push": 2, "n_fetch": 4, "clip_norm": 3.0},
         {"pushes": 60, "k": 2, "progress_every": 0.01},
         {"pushes": 30, "k": 1, "n_push": 2, "progress_every": 0.01}]


@pytest.fixture(scope="module")
def reports():
    # train-async runs on Keras 2 only (docs/keras.md): the child picks it, as the CLI does
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3", TF_NMT_KERAS="2")
    command = [sys.executable, "-m", "tests.distributed.async_case", json.dumps(CASES)]
    proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
    if proc.returncode < 0:
        # Killed by a signal: TensorFlow's parameter-server coordinator has crashed (SIGSEGV)
        # while connecting to freshly started servers, seen once in 2026-11 CI, never in the
        # cases' own logic. One fresh try; a second crash, or any wrong report, still fails.
        print(f"async case died by signal {-proc.returncode}; retrying once", file=sys.stderr)
        proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=400)
    line = next((l for l in proc.stdout.splitlines() if l.startswith("REPORTS ")), None)
    assert line is not None, f"async case failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(line[len("REPORTS "):])


@pytest.mark.parametrize("case", [0, 1])
def test_async_k_way_accumulation_counts_and_staleness(reports, case):
    k, report = CASES[case]["k"], reports[case]
    assert report["pushes"] == 40 and report["updates"] == 40 // k  # exactly one per k pushes
    assert sum(report["applied"]) == 40 // k
    assert sum(report["histogram"]) == 40 == len(report["staleness"])
    assert np.bincount(report["staleness"]).tolist() == report["histogram"]
    assert report["losses"][-1] < 0.1 * report["losses"][0]
    assert np.abs(np.array(report["kernel"]) - TRUE_W.ravel()).max() < 0.5


def test_synchronous_rounds_with_artificial_staleness(reports):
    report = reports[2]
    assert report["updates"] == 12
    # rounds of 2 pushes = 1 update; parameters pulled every 3 updates: staleness 0, 1, 2
    assert report["histogram"] == [8, 8, 8]
    assert report["losses"][-1] < report["losses"][0]


@pytest.mark.parametrize("case", [3, 4])
def test_downpour_pushes_the_mean_of_n_push_local_gradients(reports, case):
    n_push, pushes, report = CASES[case]["n_push"], CASES[case]["pushes"], reports[case]
    # exactly the pushes asked for (surplus worker steps at the end are dropped), one update each
    assert report["pushes"] == pushes and report["updates"] == pushes
    assert len(report["staleness"]) == pushes and sum(report["applied"]) == pushes
    assert report["worker_steps"] >= pushes * n_push  # each push is n_push worker steps
    assert report["losses"][-1] < 0.1 * report["losses"][0]
    assert np.abs(np.array(report["kernel"]) - TRUE_W.ravel()).max() < 0.5


def test_downpour_fetch_period_shows_as_staleness(reports):
    every_step, fetch_4 = reports[3], reports[4]
    # with the parameters fetched every 4 steps, a push's window began up to 4 steps of both
    # workers back: more staleness than fetching before every gradient
    assert fetch_4["mean"] > every_step["mean"]
    assert fetch_4["clip_norm"] == 3.0 and 0.0 < fetch_4["clipped_fraction"] < 1.0
    assert fetch_4["grad_norm_mean"] > 0


@pytest.mark.parametrize("case", [5, 6])
def test_progress_is_logged_from_the_servers_counters_while_closures_run(reports, case):
    pushes, k = CASES[case]["pushes"], CASES[case]["k"]
    counts = [tuple(map(int, re.match(r"progress: (\d+)/(\d+) pushes, (\d+) updates", line).groups()))
              for line in reports[case]["progress_lines"]]
    assert counts, "no progress line while the closures ran"
    # the two counters are read one after the other (pushes first) while pushes land: the
    # update count is at least the pushes read, over k (less one for an update being applied),
    # and at most what all pushes give; pushes landing between the reads may add any number
    assert all(total == pushes and 0 <= done <= pushes and done // k - 1 <= updates <= pushes // k
               for done, total, updates in counts)
    assert [c[0] for c in counts] == sorted(c[0] for c in counts)  # counters only grow
    # the cases without progress_every log nothing
    assert all(not reports[i]["progress_lines"] for i in range(5))


def test_cluster_stops_its_servers(reports):
    assert reports[-1] == {"servers_started": 3, "servers_left_running": 0}
