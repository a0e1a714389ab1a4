"""Which Keras a ``tf-nmt`` command builds its models on, settled before TensorFlow is imported.

``--keras`` or ``TF_NMT_KERAS`` when the user gives one; otherwise a command on an existing run
uses the Keras the run was trained on (so runs from Keras 2 keep working), ``train-async`` uses
Keras 2 (the one it runs on), and everything else the default, Keras 3 (docs/keras.md).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional, Tuple

import tf_nmt
from tf_nmt import KERAS_CHOICES  # noqa: F401 - the --keras choices, for the CLI
from tf_nmt.errors import UsageError

#: ``tf-nmt train-async`` runs on Keras 2 only (Keras 3 has no parameter-server training).
KERAS2_ONLY_COMMANDS = ("train-async",)
#: Commands that read an existing ``--run-dir`` (quickstart starts new runs; convert-keras
#: converts to the version it runs on).
RUN_READING_COMMANDS = ("train", "evaluate", "translate", "export", "quantize",
                        "average-checkpoints")


def run_keras(run_dir: Optional[Path]) -> Optional[int]:
    """The Keras ``run_dir`` was trained on, or None when it holds no run (no ``meta.json``) or
    its ``meta.json`` cannot be read (the command itself then says what is wrong)."""
    if run_dir is None:
        return None
    try:
        return tf_nmt.recorded_keras(json.loads((Path(run_dir) / "meta.json").read_text()))
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def choose_keras(version: str) -> None:
    """``--keras``: set ``TF_NMT_KERAS`` before tf-nmt's models are first imported (a process
    that already imported them with the other version cannot switch)."""
    compat = sys.modules.get("tf_nmt.compat")
    if compat is not None and str(compat.KERAS_VERSION) != version:
        raise UsageError(f"--keras {version}: this process already uses Keras "
                         f"{compat.KERAS_VERSION} for tf-nmt's models ({tf_nmt.KERAS_ENV_VAR})")
    os.environ[tf_nmt.KERAS_ENV_VAR] = version


def keras_for(command: str, run_dir: Optional[Path]) -> Optional[Tuple[str, str]]:
    """(version, why) when ``command`` on ``run_dir`` needs another Keras than the default and
    the user chose none; None otherwise (also once tf-nmt's models are imported: a caller's own
    process keeps its Keras)."""
    if tf_nmt.keras_requested() is not None or "tf_nmt.compat" in sys.modules:
        return None
    saved = run_keras(run_dir) if command in RUN_READING_COMMANDS else None
    if command in KERAS2_ONLY_COMMANDS:
        version, why = "2", f"{command} runs on Keras 2 only"
    elif saved is not None:
        version, why = str(saved), f"{run_dir} was trained with Keras {saved}"
    else:
        return None
    return None if version == tf_nmt.KERAS_DEFAULT else (version, why)


def pick_keras(command: str, run_dir: Optional[Path]) -> None:
    """Apply :func:`keras_for`, saying so in one line on stderr."""
    picked = keras_for(command, run_dir)
    if picked is not None:
        version, why = picked
        print(f"tf-nmt: using Keras {version}: {why} (pass --keras to choose; docs/keras.md)",
              file=sys.stderr)
        choose_keras(version)
