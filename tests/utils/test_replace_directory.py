"""Replacing a directory (exports, averaged checkpoints, the corpus) never leaves nothing behind:
a writer killed (SIGKILL, no clean-up) between its steps leaves the old directory under the
target name or in a set-aside copy that the next call moves back. Before issue 45 the two
renames had no recovery: a kill after the first left no target and the next call wrote a new
one without --overwrite, silently losing the old copy."""
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tf_nmt.utils import io

REPO = Path(__file__).resolve().parents[2]

# Runs one replacement in a child process and SIGKILLs it right after the named step.
CHILD = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from tf_nmt.utils import io

    target, where, can_exchange = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
    staged = io.staging_directory(target)
    (staged / "version").write_text("new")

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    real_exchange, real_replace, calls = io.exchange_paths, os.replace, []

    def exchange(a, b):
        if not can_exchange:
            return False
        done = real_exchange(a, b)
        if where == "exchange":
            die()
        return done

    def replace(a, b):
        real_replace(a, b)
        calls.append(b)
        if where == "aside" and len(calls) == 1:
            die()

    io.exchange_paths = exchange
    io.os.replace = replace
    io.replace_directory_atomically(staged, target, overwrite=True)
""")


def make_dir(path: Path, version: str) -> Path:
    path.mkdir(parents=True)
    (path / "version").write_text(version)
    return path


def killed_replace(target: Path, where: str, exchange: bool) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-c", CHILD, str(target), where, str(int(exchange))],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == -signal.SIGKILL, result.stderr


def test_a_kill_between_the_two_renames_is_recovered_by_the_next_call(tmp_path):
    target = make_dir(tmp_path / "export", "old")
    killed_replace(target, "aside", exchange=False)
    # The old copy survived the kill somewhere next to the target ...
    kept = [p for p in tmp_path.rglob("version") if p.read_text() == "old"]
    assert kept, sorted(str(p) for p in tmp_path.rglob("*"))
    # ... and the next writer puts it back before deciding: without --overwrite it refuses.
    staged = make_dir(io.staging_directory(target) / "x", "newer")
    with pytest.raises(FileExistsError):
        io.replace_directory_atomically(staged, target, overwrite=False)
    assert (target / "version").read_text() == "old"
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "export"]
    assert all(name.startswith(".export.staged.") for name in leftovers)  # only our live one


def test_recover_directory_moves_the_set_aside_copy_back(tmp_path):
    target = make_dir(tmp_path / "avg", "old")
    killed_replace(target, "aside", exchange=False)
    io.recover_directory(target)
    assert (target / "version").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["avg"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux's")
def test_a_kill_after_the_exchange_leaves_the_new_copy_and_the_old_is_cleaned_up(tmp_path):
    probe_a, probe_b = make_dir(tmp_path / "a", "a"), make_dir(tmp_path / "b", "b")
    if not io.exchange_paths(probe_a, probe_b):
        pytest.skip("this file system has no RENAME_EXCHANGE")
    target = make_dir(tmp_path / "export", "old")
    killed_replace(target, "exchange", exchange=True)
    assert (target / "version").read_text() == "new"
    io.recover_directory(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "export"]


def test_replace_uses_the_exchange_and_refuses_without_overwrite(tmp_path):
    target = make_dir(tmp_path / "export", "old")
    staged = make_dir(io.staging_directory(target) / "model", "new")
    with pytest.raises(FileExistsError):
        io.replace_directory_atomically(staged, target, overwrite=False)
    io.replace_directory_atomically(staged, target, overwrite=True)
    assert (target / "version").read_text() == "new" and not staged.exists()
    fresh = make_dir(tmp_path / "stage2", "first")
    io.replace_directory_atomically(fresh, tmp_path / "other", overwrite=False)
    assert (tmp_path / "other" / "version").read_text() == "first"


def test_without_an_exchange_the_two_rename_fallback_replaces(tmp_path, monkeypatch):
    monkeypatch.setattr(io, "exchange_paths", lambda a, b: False)
    target = make_dir(tmp_path / "export", "old")
    staged = make_dir(tmp_path / "stage", "new")
    io.replace_directory_atomically(staged, target, overwrite=True)
    assert (target / "version").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]


def test_unsupported_exchange_errors_fall_back(monkeypatch, tmp_path):
    import errno

    class FakeRenameat2:
        def __call__(self, *args):
            return -1

    monkeypatch.setattr(io, "_libc_renameat2", FakeRenameat2)
    for err in (errno.EINVAL, errno.ENOSYS):
        monkeypatch.setattr(io.ctypes, "get_errno", lambda err=err: err)
        assert io.exchange_paths(tmp_path / "a", tmp_path / "b") is False
    monkeypatch.setattr(io.ctypes, "get_errno", lambda: errno.ENOENT)
    with pytest.raises(OSError):
        io.exchange_paths(tmp_path / "a", tmp_path / "b")


def test_a_live_writers_staging_is_left_alone(tmp_path):
    target = tmp_path / "export"
    mine = io.staging_directory(target)
    dead = tmp_path / ".export.staged.999999999.abc"  # no such process
    dead.mkdir()
    io.recover_directory(target)
    assert mine.exists() and not dead.exists()
