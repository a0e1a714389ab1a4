"""Environment that Open MPI (``horovodrun --mpi`` / ``mpirun``) needs in root containers.

Open MPI refuses to start as root unless both variables below are set; Gloo does not care.
Set them in the shell (``export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1``) or
pass ``launch_env()`` as the ``env`` of a launcher subprocess.
"""
from __future__ import annotations

import os
from typing import Dict, Mapping, Optional

ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def launch_env(base: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) ready to launch Horovod workers: when running
    as root, with Open MPI's run-as-root permission. Which Keras ``tf.keras`` is stays the
    caller's choice (tf-nmt's models are tf_keras objects either way)."""
    env = dict(os.environ if base is None else base)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        for key, value in ROOT_ENV.items():
            env.setdefault(key, value)
    return env
