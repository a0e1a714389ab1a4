"""Where an own corpus is built, so a killed prepare-data resumes, and what DATA_DIR may be replaced.

The build happens in ``DATA_DIR.partial`` next to DATA_DIR: ``state.json`` (the key of the inputs
and parameters, and every finished pass and shard), ``work/`` (bucket files, the vocabulary
sample) and ``out/`` (what becomes DATA_DIR: corpus/, vocab/, shards/). Re-running the same
command resumes from ``state.json``; other inputs or parameters discard the stale directory. At
the end ``out/`` replaces DATA_DIR atomically (:func:`tf_nmt.utils.io.replace_directory_atomically`).
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any, Callable, Dict, Optional

from tf_nmt.data.prepared import DataError, manifest_path, read_prepared
from tf_nmt.utils.io import write_json_atomic

from .errors import OwnCorpusError

Log = Callable[[str], None]


def build_key(inputs: Dict[str, Any], params: Dict[str, Any]) -> str:
    """The hash of what decides the result: the inputs' paths, sizes, mtimes and the parameters."""
    text = json.dumps({"inputs": inputs, "params": params}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def staging_path(data_dir: Path) -> Path:
    return data_dir.parent / f"{data_dir.name}.partial"


def _read_json(path: Path) -> Optional[Dict[str, Any]]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


class Staging:
    """The partial build of one key: its directories and its ``state.json``."""

    def __init__(self, data_dir: Path, key: str, log: Log) -> None:
        self.root = staging_path(data_dir)
        self.key = key
        self.state: Dict[str, Any] = {"key": key, "shards": {}, "timings": {}}
        if self.root.exists():
            state = _read_json(self.root / "state.json")
            if state is not None and state.get("key") == key and "vocab" in state \
                    and not self.out.is_dir():
                log(f"removed {self.root}: the leftover of a finished build whose clean-up was "
                    "interrupted (its output was already moved)")
                shutil.rmtree(self.root)
            elif state is not None and state.get("key") == key:
                self.state = state
                done = [p for p in ("validate", "distribute", "vocab") if p in state]
                log(f"resuming the partial build in {self.root} (done: "
                    f"{', '.join(done) or 'nothing'}; {len(state.get('shards', {}))} shards)")
            else:
                log(f"discarding {self.root}: a partial build of other inputs or parameters")
                shutil.rmtree(self.root)

    @property
    def out(self) -> Path:
        return self.root / "out"

    @property
    def work(self) -> Path:
        return self.root / "work"

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.root / "state.json", self.state)

    def discard(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def clear_leftover(data_dir: Path, key: str, log: Log) -> None:
    """Remove ``DATA_DIR.partial`` when DATA_DIR already holds its build ``key`` (a run killed
    between replacing DATA_DIR and cleaning up leaves a copy of the corpus's buckets there);
    a partial build of other inputs or parameters is kept, and said in one line."""
    root = staging_path(data_dir)
    if not root.exists():
        return
    state = _read_json(root / "state.json")
    if state is not None and state.get("key") == key:
        shutil.rmtree(root, ignore_errors=True)
        log(f"removed {root}: the leftover of this build, whose clean-up was interrupted")
    else:
        log(f"note: {root} holds a partial build of other inputs or parameters; re-run that "
            "command to resume it, or delete it")


def _incomplete(data_dir: Path, manifest: Dict[str, Any]) -> Optional[str]:
    """Why a prepared own corpus is not usable as it stands, or None."""
    try:
        prepared = read_prepared(data_dir)
        prepared.shard_paths()
    except DataError as err:
        return str(err)
    recorded = manifest.get("vocab", {})
    entries = [recorded] if recorded.get("shared", True) else [recorded, recorded.get("src", {})]
    for entry in entries:
        vocab = data_dir / entry.get("path", "")
        if not vocab.is_file():
            return f"{vocab}: vocabulary missing"
    for split in manifest.get("splits", {}):
        if split != "train" and not prepared.has_split(split):
            return f"{split} split missing"
    return None


def _held(data_dir: Path, manifest: Optional[Dict[str, Any]], params: Dict[str, Any]) -> str:
    """What ``data_dir`` holds, in words."""
    if manifest is not None:
        differs = sorted(k for k in params if manifest.get("params", {}).get(k) != params[k])
        return ("an own corpus prepared with other parameters (" + ", ".join(differs) + ")"
                if differs else "an own corpus prepared from other input files (or the same "
                "files since changed)")
    if (data_dir / "corpus" / "stats.json").is_file():
        return "the built-in en-de corpus"
    names = sorted(p.name for p in data_dir.iterdir())
    return f"other files ({', '.join(names[:4])}{', ...' if len(names) > 4 else ''})"


def cached_or_refused(data_dir: Path, key: str, params: Dict[str, Any], force: bool,
                      log: Log) -> Optional[Dict[str, Any]]:
    """The manifest of ``data_dir`` when it already holds this very corpus (a cache hit);
    None when it may be (re)built; one refusal line when it holds anything else and not ``force``."""
    if not data_dir.exists():
        return None
    if not data_dir.is_dir():
        raise OwnCorpusError(f"{data_dir}: not a directory")
    if not any(data_dir.iterdir()):
        return None
    manifest = _read_json(manifest_path(data_dir))
    if manifest is not None and manifest.get("key") == key:
        problem = _incomplete(data_dir, manifest)
        if problem is None:
            return manifest
        log(f"{data_dir}: this corpus, but damaged ({problem}); preparing it again")
        return None
    held = _held(data_dir, manifest, params)
    if force:
        log(f"--force: {data_dir} ({held}) will be replaced")
        return None
    raise OwnCorpusError(f"{data_dir} holds {held}: preparing this corpus would replace it; "
                         "pass --force to replace it (everything in it is deleted)")
