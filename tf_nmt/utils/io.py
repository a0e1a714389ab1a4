"""Atomic file and directory writes: a reader (or a crash) never sees a half-written file or
directory under the final name.

Every file tf-nmt writes that another step reads back (configs, vocabularies, run metadata,
reports, statistics) goes through these, so an interrupted run leaves either the old file or the
new one.
"""
from __future__ import annotations

import ctypes
import errno
import functools
import glob
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping, Union

PathLike = Union[str, Path]


def fsync_directory(path: PathLike) -> None:
    """fsync the directory ``path``, so that a rename or a new entry in it survives a power
    loss (a rename alone is durable only once its directory is synced)."""
    fd = os.open(str(path), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_atomic(path: PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory, fsync, rename and
    fsync the directory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        fsync_directory(path.parent)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text_atomic(path: PathLike, text: str) -> None:
    """:func:`write_bytes_atomic` for UTF-8 text."""
    write_bytes_atomic(path, text.encode("utf-8"))


def _jsonable(value: Any) -> Any:
    """NumPy scalars and arrays (e.g. a per-channel quantisation scale in a report) as JSON."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def write_json_atomic(path: PathLike, payload: Mapping[str, Any], indent: int = 2) -> None:
    """Write ``payload`` as sorted, indented JSON (with a final newline), atomically; NumPy
    values are written as numbers and lists."""
    write_text_atomic(path, json.dumps(payload, indent=indent, sort_keys=True,
                                       default=_jsonable) + "\n")


# Staged and set-aside directories are named after their target and the writing process, so the
# next writer can tell a crashed writer's leftovers (its process is gone) from a live one's.
STAGED_TAG = "staged"
ASIDE_TAG = "old"
_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100
# renameat2 answers these where the kernel, the file system or a seccomp filter lacks
# RENAME_EXCHANGE; the two-rename fallback (recovered by recover_directory) is used instead.
_NO_EXCHANGE_ERRNOS = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EPERM}


def _sidecar_prefix(target: Path, tag: str) -> str:
    return f".{target.name}.{tag}."


def _sidecar_directory(target: Path, tag: str) -> Path:
    """A new empty directory next to ``target``, named after it, ``tag`` and this process."""
    return Path(tempfile.mkdtemp(dir=target.parent,
                                 prefix=f"{_sidecar_prefix(target, tag)}{os.getpid()}."))


def staging_directory(target: PathLike) -> Path:
    """A new empty directory next to ``target`` to build its replacement in; leftovers of a
    crashed writer are removed by :func:`recover_directory`."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    return _sidecar_directory(target, STAGED_TAG)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _sidecars(target: Path, tag: str) -> list:
    """``target``'s staged or set-aside directories whose writer is no longer running."""
    prefix = _sidecar_prefix(target, tag)
    found = []
    for path in target.parent.glob(f"{glob.escape(prefix)}*") if target.parent.is_dir() else ():
        pid = path.name[len(prefix):].split(".", 1)[0]
        if path.is_dir() and pid.isdigit() and not _process_alive(int(pid)):
            found.append(path)
    return sorted(found, key=lambda d: d.stat().st_mtime)


def recover_directory(target: PathLike) -> None:
    """Finish or undo a replacement of ``target`` that a crashed process left half done: a
    set-aside copy whose target is missing is moved back; other leftovers are removed."""
    target = Path(target)
    for aside in reversed(_sidecars(target, ASIDE_TAG)):  # newest first
        kept = aside / target.name
        if kept.exists() and not os.path.lexists(target):
            os.replace(kept, target)
        shutil.rmtree(aside, ignore_errors=True)
    for staged in _sidecars(target, STAGED_TAG):
        shutil.rmtree(staged, ignore_errors=True)


@functools.lru_cache(maxsize=None)
def _libc_renameat2() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function = libc.renameat2
    except (OSError, AttributeError):  # no glibc 2.28+ (e.g. musl without the symbol)
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                         ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def exchange_paths(a: PathLike, b: PathLike) -> bool:
    """Swap ``a`` and ``b`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where the
    system cannot (other OS, old libc or kernel, a file system without it)."""
    renameat2 = _libc_renameat2()
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in _NO_EXCHANGE_ERRNOS:
        return False
    raise OSError(err, f"renameat2({a}, {b}, RENAME_EXCHANGE): {os.strerror(err)}")


def replace_directory_atomically(staged: Path, target: Path, overwrite: bool) -> None:
    """Move the finished ``staged`` directory to ``target`` (same file system); an existing one is
    refused unless ``overwrite``.

    A crash never leaves neither: an existing target is swapped with ``staged`` in one step
    where the OS can (the old copy is then under the staged name, removed afterwards or as a
    leftover); elsewhere it is first moved to ``.TARGET.old.PID.*``, which the next call (or
    :func:`recover_directory`) moves back if the process died before the second rename.
    """
    staged, target = Path(staged), Path(target)
    recover_directory(target)
    fsync_tree(staged)  # the contents are on disk before any name points at them
    if not os.path.lexists(target):
        os.replace(staged, target)
        fsync_directory(target.parent)
        return
    if not overwrite:
        raise FileExistsError(f"{target} exists; pass --overwrite to replace it")
    if exchange_paths(staged, target):
        fsync_directory(target.parent)
        shutil.rmtree(staged, ignore_errors=True)  # now the old copy
        return
    old = _sidecar_directory(target, ASIDE_TAG)
    os.replace(target, old / target.name)
    os.replace(staged, target)
    fsync_directory(target.parent)
    shutil.rmtree(old, ignore_errors=True)


def fsync_tree(root: PathLike) -> None:
    """fsync every file and directory under ``root`` (a finished staged directory)."""
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                fsync_file(path)
        fsync_directory(folder)


def fsync_file(path: PathLike) -> None:
    """fsync the file ``path`` (written by a library that does not, e.g. TFRecordWriter), so its
    bytes are on disk before a rename or a record claims it is finished."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
