"""Atomic file and directory writes: a reader (or a crash) never sees a half-written file or
directory under the final name.

Every file tf-nmt writes that another step reads back (configs, vocabularies, run metadata,
reports, statistics) goes through these, so an interrupted run leaves either the old file or the
new one.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Mapping, Union

PathLike = Union[str, Path]


def write_bytes_atomic(path: PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory, fsync and rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text_atomic(path: PathLike, text: str) -> None:
    """:func:`write_bytes_atomic` for UTF-8 text."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: PathLike, payload: Mapping[str, Any], indent: int = 2) -> None:
    """Write ``payload`` as sorted, indented JSON (with a final newline), atomically."""
    write_text_atomic(path, json.dumps(payload, indent=indent, sort_keys=True) + "\n")


def replace_directory_atomically(staged: Path, target: Path, overwrite: bool) -> None:
    """Move the finished ``staged`` directory to ``target`` (same file system); an existing one is
    refused unless ``overwrite``, and is then moved aside first, so a crash between the two renames
    leaves it in ``.TARGET.old.*`` instead of losing it."""
    if target.exists():
        if not overwrite:
            raise FileExistsError(f"{target} exists; pass --overwrite to replace it")
        old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.old."))
        os.replace(target, old / target.name)
        os.replace(staged, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staged, target)
