"""Launching a worker script under a real ``horovodrun -np N`` (via
:mod:`experiments.lib.launcher`) and collecting its JSON files."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from horovod_patches.mpi_env import launch_env
from experiments.lib import launcher

REPO = Path(__file__).resolve().parents[2]
WORKERS = Path(__file__).resolve().parent / "workers"


def horovod_importable() -> bool:
    """Horovod installed with its TensorFlow extension (checked in a child: importing it here
    would pull TensorFlow and Horovod into the pytest process)."""
    if importlib.util.find_spec("horovod") is None:
        return False
    code = "import horovod.tensorflow"
    return subprocess.run([sys.executable, "-c", code], env=launch_env(),
                          capture_output=True, timeout=120).returncode == 0


def module_marks() -> list:
    """``pytestmark`` of a module that launches ``horovodrun``: parallel, slow, and skipped
    where Horovod's TensorFlow extension is not importable."""
    import pytest  # noqa: PLC0415 - the workers import this module too

    return [pytest.mark.parallel, pytest.mark.slow,
            pytest.mark.skipif(not horovod_importable(), reason="horovod.tensorflow is not "
                               "importable: build it with scripts/install_horovod.sh")]


def controllers() -> List[str]:
    """``gloo`` and, when Horovod was built with it and mpirun exists, ``mpi``."""
    code = "import horovod.tensorflow as h; print(int(h.gloo_built()), int(h.mpi_built()))"
    out = subprocess.run([sys.executable, "-c", code], env=launch_env(), capture_output=True,
                         text=True, timeout=120)
    gloo, mpi = (out.stdout.split() + ["0", "0"])[:2] if out.returncode == 0 else ("0", "0")
    found = [name for name, flag in (("gloo", gloo), ("mpi", mpi)) if flag == "1"]
    return found


#: The ranks' environment for workers of Horovod's own Keras 2 integration (tf_keras models, legacy
#: optimizers, Horovod's tape and wrapper): tf-nmt's models on Keras 2, whatever the suite runs on.
#: Keras 3's counterparts: test_keras3_horovod.py, test_keras3_tfnmt.py, test_graddrop_keras3.py.
KERAS2 = {"TF_NMT_KERAS": "2"}


def horovodrun(script: str, out_dir: Path, controller: str = "gloo", np: int = 2,
               timeout: int = 300, env: Optional[Mapping[str, str]] = None) -> Dict[int, dict]:
    """Run ``workers/<script>`` on ``np`` local processes with the package's launcher (its
    command line and rank environment, ``env`` added); return {rank: its JSON}."""
    launcher.run(WORKERS / script, ["--out", str(out_dir)], np, controller, env=env,
                 timeout=timeout, cwd=REPO)
    results = {int(p.stem[4:]): json.loads(p.read_text()) for p in out_dir.glob("rank*.json")}
    assert sorted(results) == list(range(np)), f"missing rank outputs: {sorted(results)}"
    return results


def horovodrun_with_arrays(script: str, out_dir: Path, env: Optional[Mapping[str, str]] = None,
                           np: int = 2, timeout: int = 900) -> Tuple[Dict[int, dict], Dict[int, dict]]:
    """Run ``workers/<script>`` on ``np`` Gloo ranks with ``env`` added to the ranks'
    environment; return ({rank: its JSON}, {rank: its ``rank<r>.npz`` arrays})."""
    import numpy  # noqa: PLC0415 - only the launches that save arrays need it

    launcher.run(WORKERS / script, ["--out", str(out_dir)], np, "gloo", env=env, timeout=timeout,
                 cwd=REPO)
    ranks = range(np)
    return ({r: json.loads((out_dir / f"rank{r}.json").read_text()) for r in ranks},
            {r: dict(numpy.load(out_dir / f"rank{r}.npz")) for r in ranks})
