"""The horovodrun command line and environment the study scripts launch with."""
import sys
from pathlib import Path

import pytest

from tf_nmt.distributed import launcher


def test_command_oversubscribes_localhost():
    cmd = launcher.horovodrun_command(Path("s.py"), ["--worker"], 4, "gloo", python="/v/bin/python")
    assert cmd == ["/v/bin/horovodrun", "-np", "4", "-H", "localhost:4", "--gloo",
                   "/v/bin/python", "s.py", "--worker"]
    assert launcher.horovodrun_command(Path("s.py"), [], 2, "mpi")[5:7] == ["--mpi", sys.executable]


def test_bad_arguments():
    with pytest.raises(ValueError, match=">= 1"):
        launcher.horovodrun_command(Path("s.py"), [], 0)
    with pytest.raises(ValueError, match="unknown controller"):
        launcher.horovodrun_command(Path("s.py"), [], 2, "nccl")


def test_worker_env():
    env = launcher.worker_env({"HOROVOD_TIMELINE": "DYNAMIC"})
    assert env["TF_USE_LEGACY_KERAS"] == "1" and env["HOROVOD_TIMELINE"] == "DYNAMIC"
    assert env["PYTHONPATH"].split(":")[0] == str(launcher.REPO)
    assert env["TF_NUM_INTRAOP_THREADS"] == "1"


def test_failed_launch_raises_with_output(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text("import sys; print('boom'); sys.exit(3)\n")
    runner = Path(sys.executable).parent / "horovodrun"
    if not runner.exists():
        pytest.skip("horovodrun is not installed")
    with pytest.raises(RuntimeError, match="boom"):
        launcher.run(script, [], 1, timeout=120)


def test_prefix_wraps_any_command():
    prefix = launcher.horovodrun_prefix(2, "mpi", python="/v/bin/python")
    assert prefix == ["/v/bin/horovodrun", "-np", "2", "-H", "localhost:2", "--mpi"]
