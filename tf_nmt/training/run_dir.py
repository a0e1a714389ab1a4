"""A training run's directory and the guard that keeps a resume consistent.

Layout: ``config.yaml`` (resolved config), ``vocab.model`` (SentencePiece proto), ``meta.json``
(vocabulary fingerprint, model kind/hparams, world size), ``checkpoints/`` and ``logs/``.
Resuming with a different vocabulary, model or (unless allowed) world size is refused before
anything is written.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional

from tf_nmt.data.tokenizer import write_bytes_atomic


class RunDirError(ValueError):
    """The run directory does not match what this invocation would write into it."""


@dataclass(frozen=True)
class RunDir:
    root: Path

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def meta_path(self) -> Path:
        return self.root / "meta.json"

    @property
    def vocab_path(self) -> Path:
        return self.root / "vocab.model"

    @property
    def config_path(self) -> Path:
        return self.root / "config.yaml"

    def read_meta(self) -> Optional[Dict[str, Any]]:
        if not self.meta_path.is_file():
            return None
        return json.loads(self.meta_path.read_text())

    def has_checkpoint(self) -> bool:
        return (self.checkpoints / "checkpoint").is_file()

    def write_meta(self, meta: Dict[str, Any]) -> None:
        write_bytes_atomic(self.meta_path, json.dumps(meta, indent=2, sort_keys=True).encode())


def check_resume(run: RunDir, meta: Dict[str, Any], allow_world_size_change: bool = False) -> bool:
    """Compare this run's ``meta`` with what ``run`` holds. Returns True when resuming.

    Raises :class:`RunDirError` for a different vocabulary or model architecture, and for a
    different world size unless ``allow_world_size_change`` (the effective batch and the
    learning-rate scaling would silently change).
    """
    saved = run.read_meta()
    if saved is None:
        if run.has_checkpoint():
            raise RunDirError(f"{run.root} has checkpoints but no meta.json; refusing to guess "
                              "what they were trained with")
        return False
    if saved.get("vocab_fingerprint") != meta.get("vocab_fingerprint"):
        raise RunDirError(
            f"cannot resume {run.root}: it was trained with vocabulary {saved.get('vocab_fingerprint')} "
            f"but this run uses {meta.get('vocab_fingerprint')} (different data or vocab_size). "
            "Use a new --run-dir; nothing was overwritten.")
    for key in ("model_kind", "model_hparams"):
        if saved.get(key) != meta.get(key):
            raise RunDirError(
                f"cannot resume {run.root}: {key} differs (saved {saved.get(key)!r}, now "
                f"{meta.get(key)!r}). Use a new --run-dir; nothing was overwritten.")
    if saved.get("world_size") != meta.get("world_size") and not allow_world_size_change:
        raise RunDirError(
            f"cannot resume {run.root}: its checkpoints were written by {saved.get('world_size')} "
            f"worker(s) but this run has {meta.get('world_size')}. The effective batch and the "
            "learning-rate scaling would change; pass --allow-world-size-change to resume anyway.")
    return run.has_checkpoint()
