"""Launcher detection and the single-process context (no Horovod needed)."""
import subprocess
import sys

import pytest

from tf_nmt import distributed
from tf_nmt.distributed import context


def test_single_process_defaults(monkeypatch):
    for key in ("HOROVOD_RANK", "HOROVOD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                "PMI_RANK", "PMI_SIZE"):
        monkeypatch.delenv(key, raising=False)
    ctx = distributed.init()
    assert (ctx.rank, ctx.size, ctx.local_rank, ctx.is_chief, ctx.distributed) == (0, 1, 0, True, False)
    assert distributed.init(enabled=False) is distributed.SINGLE


@pytest.mark.parametrize("env, expected", [
    ({"HOROVOD_RANK": "1", "HOROVOD_SIZE": "4", "HOROVOD_LOCAL_RANK": "1", "HOROVOD_LOCAL_SIZE": "2"},
     (1, 4, 1, 2)),
    ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0"},
     (3, 4, 0, 4)),
    ({"PMI_RANK": "2", "PMI_SIZE": "3"}, (2, 3, 2, 3)),
])
def test_launch_info_reads_launcher_env(env, expected):
    info = context.launch_info(env)
    assert (info.rank, info.size, info.local_rank, info.local_size) == expected
    assert info.is_chief == (expected[0] == 0)


def test_not_launched():
    assert context.launch_info({"PATH": "/bin"}) is None


def test_launched_with_one_process_stays_single(monkeypatch):
    monkeypatch.setenv("HOROVOD_RANK", "0")
    monkeypatch.setenv("HOROVOD_SIZE", "1")
    ctx = distributed.init()
    assert ctx.size == 1 and ctx.hvd is None


def test_enabled_without_horovod_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(context, "horovod_available", lambda: False)
    monkeypatch.setattr(context, "_current", None)
    with pytest.raises(ImportError, match="install_horovod"):
        distributed.init(enabled=True)


def test_single_process_never_imports_horovod():
    code = ("import sys; from tf_nmt import distributed as d; ctx = d.init(); "
            "from tf_nmt.compat import keras; from tf_nmt.distributed import comm; "
            "s = comm.CommSettings(); opt = keras.optimizers.SGD(0.1); "
            "assert comm.wrap_optimizer(opt, s, ctx) is opt; "
            "assert [type(c).__name__ for c in comm.comm_callbacks(s, ctx)] == ['CommStats']; "
            "assert 'horovod' not in sys.modules, 'horovod was imported'")
    env = {k: v for k, v in __import__("os").environ.items()
           if not k.startswith(("HOROVOD_", "OMPI_", "PMI_"))}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)


def test_horovod_cycle_time_defaults_and_keeps_the_launchers_value():
    assert context.horovod_cycle_time({}) == context.DEFAULT_CYCLE_TIME_MS
    assert context.horovod_cycle_time({"HOROVOD_CYCLE_TIME": " "}) == context.DEFAULT_CYCLE_TIME_MS
    assert context.horovod_cycle_time({"HOROVOD_CYCLE_TIME": "2.5"}) == 2.5  # horovodrun --cycle-time-ms


@pytest.mark.parametrize("bad", ["0", "-1", "fast", "nan", "inf"])
def test_a_bad_horovod_cycle_time_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="HOROVOD_CYCLE_TIME.*positive number of milliseconds"):
        context.horovod_cycle_time({"HOROVOD_CYCLE_TIME": bad})
