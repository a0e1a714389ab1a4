"""Kill tests with real processes: SIGKILL one rank of a ``horovodrun -np 2`` run, and SIGKILL a
process in the middle of checkpoint and export writes (issue 15 item 3)."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.helpers import write_toy_data_dir
from tests.parallel import launch
from experiments.lib import launcher
from experiments.chaos import study as chaos
from experiments.lib import common

pytestmark = [pytest.mark.parallel, pytest.mark.slow]

if not launch.horovod_importable():
    pytest.skip("horovod.tensorflow is not importable: build it with scripts/install_horovod.sh",
                allow_module_level=True)

HANG_GUARD_S = 300  # generous: a job that outlives this is hung


def toy_data(root: Path) -> Path:
    """Toy corpus with its vocabulary learnt once (workers refuse to learn it concurrently)."""
    data = write_toy_data_dir(root)
    code = ("import sys; from pathlib import Path; from tf_nmt.data.data_dir import ensure_vocab;"
            "ensure_vocab(Path(sys.argv[1]), 320)")
    subprocess.run([sys.executable, "-c", code, str(data)], check=True, capture_output=True,
                   env=launcher.worker_env(), timeout=300)
    return data


def train_command(run: Path, data: Path, steps: int) -> list:
    overrides = chaos.TINY + [f"train.train_steps={steps}", "train.steps_per_cycle=20"]
    return [*common.tf_nmt_command(), "train", "--run-dir", str(run), "--data-dir", str(data),
            *common.set_args(overrides)]


def rank_pid(root_pid: int, rank: int) -> int:
    for pid in chaos.worker_pids(root_pid):
        if psutil.Process(pid).environ().get("HOROVOD_RANK") == str(rank):
            return pid
    raise AssertionError(f"no worker of rank {rank} under {root_pid}")


def load_checkpoint_step(run: Path) -> int:
    """Load the run's latest checkpoint in a fresh process; its optimizer step."""
    code = ("import sys; from pathlib import Path; from tf_nmt.run_dir import load_trained_model;"
            "m, _, _ = load_trained_model(Path(sys.argv[1])); print(len(m.get_weights()))")
    subprocess.run([sys.executable, "-c", code, str(run)], check=True, capture_output=True,
                   env=launcher.worker_env(), timeout=300)
    latest = (run / "checkpoints" / "checkpoint").read_text().splitlines()[0]
    return int(latest.rsplit("-", 1)[1].strip('"'))


def test_sigkill_of_one_rank_ends_the_job_and_the_run_resumes(tmp_path):
    data, run = toy_data(tmp_path / "data"), tmp_path / "run"
    cmd = launcher.horovodrun_command(2, train_command(run, data, 5000))
    log = open(tmp_path / "job.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env=launcher.worker_env())
    try:
        chaos.wait_for(lambda: (run / "checkpoints" / "checkpoint").is_file()
                       and chaos.last_step(run) >= 25, proc, HANG_GUARD_S, "a checkpoint")
        killed_at = time.monotonic()
        os.kill(rank_pid(proc.pid, 1), signal.SIGKILL)
        code = proc.wait(timeout=HANG_GUARD_S)  # a hang fails here
        ended_after = time.monotonic() - killed_at
    finally:
        chaos.stop(proc)
    output = (tmp_path / "job.log").read_text()
    assert code != 0
    assert "exit with status code 137" in output or "exited with non-zero status" in output, output[-2000:]
    print(f"job ended {ended_after:.1f} s after the kill")
    step = load_checkpoint_step(run)
    assert step >= 20
    resumed = launcher.horovodrun_command(2, train_command(run, data, step + 20))
    out = subprocess.run(resumed, capture_output=True, text=True, env=launcher.worker_env(),
                         timeout=HANG_GUARD_S)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"resuming from step {step}" in out.stdout
    assert f"trained to step {step + 20}" in out.stdout


def test_sigkill_mid_write_leaves_the_previous_checkpoint_and_no_partial_export(tmp_path):
    script = launch.WORKERS / "write_loop.py"
    rng = random.Random(15)
    env = launcher.worker_env(threads=2)
    seen = []
    for _ in range(3):  # three kills at random points of a write, each resumed by a new process
        proc = subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE,
                                text=True, env=env, start_new_session=True)
        try:
            for _ in range(2):  # two complete iterations, then a random point of the next ones
                assert proc.stdout.readline().startswith("wrote"), "the write loop stopped"
            time.sleep(rng.uniform(0.0, 1.5))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)
        finally:
            chaos.stop(proc)
        out = subprocess.run([sys.executable, str(script), str(tmp_path), "--check"],
                             capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        state = json.loads(out.stdout)
        seen.append(state)
        assert state["checkpoint_uniform"], state  # the latest checkpoint is a whole one
        assert state["export_exists"]  # an export under the final name is always a whole one
        assert state["export_value"] in (2.0 * 2_000_000 * n for n in range(1, 10_000)), state
    assert seen[-1]["checkpoint"] > seen[0]["checkpoint"]
