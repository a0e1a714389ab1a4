"""Atomic file writes: a reader (or a crash) never sees a half-written file under the final name.

Every file tf-nmt writes that another step reads back (configs, vocabularies, run metadata,
reports, statistics) goes through these, so an interrupted run leaves either the old file or the
new one.
"""
from __future__ import annotations

import json
import os
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
