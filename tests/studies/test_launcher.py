"""The one launcher module: horovodrun/mpirun command lines, the rank environment, and a run."""
import sys
from pathlib import Path

import pytest

from experiments.lib import launcher


def test_local_command_oversubscribes_localhost():
    prefix = launcher.horovodrun_prefix(4, "gloo", python="/v/bin/python")
    assert prefix == ["/v/bin/horovodrun", "-np", "4", "-H", "localhost:4", "--gloo"]
    cmd = launcher.horovodrun_command(2, [sys.executable, "s.py"], "mpi")
    assert cmd[0] == str(Path(sys.executable).parent / "horovodrun")
    assert cmd[1:] == ["-np", "2", "-H", "localhost:2", "--mpi", sys.executable, "s.py"]


def test_cluster_command_forms():
    cmd = ["python", "w.py"]
    hosts = launcher.horovodrun_command(8, cmd, hosts="a:4,b:4", network_interface="eth1")
    assert hosts[1:] == ["-np", "8", "-H", "a:4,b:4", "--gloo", "--network-interface", "eth1",
                         "python", "w.py"]
    hostfile = launcher.horovodrun_command(8, cmd, hostfile="hosts.txt", controller="mpi")
    assert hostfile[1:] == ["-np", "8", "--hostfile", "hosts.txt", "--mpi", "python", "w.py"]


def test_bad_arguments():
    with pytest.raises(ValueError, match=">= 1"):
        launcher.horovodrun_command(0, ["python"])
    with pytest.raises(ValueError, match="unknown controller"):
        launcher.horovodrun_command(2, ["python"], "nccl")
    with pytest.raises(ValueError, match="not both"):
        launcher.horovodrun_command(2, ["python"], hosts="a:1", hostfile="h")
    with pytest.raises(ValueError, match="not both"):
        launcher.mpirun_command(2, ["python"], hosts="a:1", hostfile="h")
    with pytest.raises(ValueError, match="threads"):
        launcher.worker_env(threads=0)


def test_mpirun_forwards_the_rank_environment():
    cmd = launcher.mpirun_command(4, ["python", "w.py"], hostfile="hosts.txt")
    assert cmd[:3] == ["mpirun", "-np", "4"] and cmd[-2:] == ["python", "w.py"]
    assert cmd[cmd.index("--hostfile") + 1] == "hosts.txt"
    forwarded = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-x"]
    assert forwarded == list(launcher.FORWARDED_ENV)
    assert set(launcher.THREAD_VARS) <= set(forwarded)
    assert "TF_USE_LEGACY_KERAS" not in forwarded  # tf-nmt does not choose the ranks' Keras


def test_worker_env_decides_threads_once_and_assumes_no_checkout():
    base = {"PATH": "/usr/bin", "OMP_NUM_THREADS": "16"}
    env = launcher.worker_env({"HOROVOD_TIMELINE": "DYNAMIC"}, base=base)
    assert "TF_USE_LEGACY_KERAS" not in env and env["HOROVOD_TIMELINE"] == "DYNAMIC"
    assert all(env[name] == "1" for name in launcher.THREAD_VARS)
    assert "PYTHONPATH" not in env
    two = launcher.worker_env(threads=2, base=base)
    assert all(two[name] == "2" for name in launcher.THREAD_VARS)
    assert base == {"PATH": "/usr/bin", "OMP_NUM_THREADS": "16"}  # the caller's copy is untouched


def test_failed_launch_raises_with_output(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text("import sys; print('boom'); sys.exit(3)\n")
    if not (Path(sys.executable).parent / "horovodrun").exists():
        pytest.skip("horovodrun is not installed")
    with pytest.raises(launcher.LaunchError, match="boom"):
        launcher.run(script, [], 1, timeout=120)
