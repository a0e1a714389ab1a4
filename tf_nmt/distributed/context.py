"""Who am I in the job: rank/size detection and (optional) Horovod initialisation.

Horovod is imported only when it is really used (launched by ``horovodrun``/``mpirun`` with more
than one process, or ``init(enabled=True)``), so single-process runs work without Horovod.
"""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional

# (rank, size, local_rank, local_size) variables set by the launchers we know, in priority order:
# horovodrun (Gloo), Open MPI (horovodrun --mpi / mpirun), MPICH / Intel MPI (PMI).
_LAUNCHER_ENV = (
    ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
)


@dataclass(frozen=True)
class DistContext:
    """This process's place in the job. ``hvd`` is the ``horovod.tensorflow`` module or None."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1
    hvd: Any = None

    @property
    def is_chief(self) -> bool:
        """Rank 0 writes checkpoints, logs and run metadata."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """True when collectives are needed (Horovod initialised and more than one process)."""
        return self.hvd is not None and self.size > 1


SINGLE = DistContext()
_current: Optional[DistContext] = None

# Horovod's background thread wakes every HOROVOD_CYCLE_TIME ms and runs a control exchange with
# every other rank, also while the ranks compute. Horovod's default, 1 ms, costs each rank about
# 0.15 of a core when idle and, with more ranks than cores, stalls the ranks' compute
# (README "Horovod's cycle time"); 10 ms costs each step at most ~10 ms of collective latency.
CYCLE_TIME_VAR = "HOROVOD_CYCLE_TIME"
DEFAULT_CYCLE_TIME_MS = 10.0


def horovod_cycle_time(environ: Optional[Mapping[str, str]] = None) -> float:
    """The cycle time (ms) Horovod will use: the launcher's ``HOROVOD_CYCLE_TIME`` (``horovodrun
    --cycle-time-ms``) when set, else :data:`DEFAULT_CYCLE_TIME_MS`. ValueError for a value that
    is not a positive number (Horovod would read it as 0 and spin)."""
    env = os.environ if environ is None else environ
    text = env.get(CYCLE_TIME_VAR)
    if text is None or not text.strip():
        return DEFAULT_CYCLE_TIME_MS
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{CYCLE_TIME_VAR}={text!r}: expected a positive number of milliseconds "
                         f"(unset it for tf-nmt's default, {DEFAULT_CYCLE_TIME_MS:g})")
    return value


def horovod_available() -> bool:
    """Whether Horovod is installed (checked without importing it)."""
    return importlib.util.find_spec("horovod") is not None


def launch_info(environ: Optional[Mapping[str, str]] = None) -> Optional[DistContext]:
    """Rank/size from a launcher's environment variables, or None when not launched by one."""
    env = os.environ if environ is None else environ
    for rank_k, size_k, lrank_k, lsize_k in _LAUNCHER_ENV:
        if rank_k in env and size_k in env:
            size = int(env[size_k])
            return DistContext(rank=int(env[rank_k]), size=size,
                               local_rank=int(env.get(lrank_k, env[rank_k])),
                               local_size=int(env.get(lsize_k, size)))
    return None


def init(enabled: Optional[bool] = None, pin_gpu: bool = True) -> DistContext:
    """Initialise Horovod when wanted and return this process's :class:`DistContext`.

    ``enabled=None`` (auto): use Horovod iff launched with more than one process.
    ``enabled=False``: always a single-process context (Horovod is not imported).
    ``enabled=True``: require Horovod (ImportError with a hint when it is missing).
    ``pin_gpu`` makes each process see only the GPU of its local rank (Horovod's convention);
    it must run before TensorFlow touches the GPUs. Horovod's cycle time is
    :func:`horovod_cycle_time` (tf-nmt's default unless the launcher set one).
    """
    global _current
    if enabled is False:
        return SINGLE
    if enabled is None:
        launched = launch_info()
        if launched is None or launched.size <= 1:
            return _current or SINGLE
    if _current is not None:
        return _current
    if not horovod_available():
        raise ImportError("Horovod is not installed but a distributed run was requested; build it "
                          "with scripts/install_horovod.sh (or run a single process)")
    import horovod.tensorflow as hvd  # noqa: PLC0415 - optional dependency, imported on demand

    os.environ[CYCLE_TIME_VAR] = f"{horovod_cycle_time():g}"  # read by hvd.init()
    hvd.init()
    if pin_gpu:
        _pin_gpu(hvd.local_rank())
    _current = DistContext(rank=hvd.rank(), size=hvd.size(), local_rank=hvd.local_rank(),
                           local_size=hvd.local_size(), hvd=hvd)
    return _current


def current() -> DistContext:
    """The context set up by the last distributed :func:`init`, else the single-process one."""
    return _current or SINGLE


def _pin_gpu(local_rank: int) -> None:
    from tf_nmt.compat import tf  # noqa: PLC0415

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        for gpu in gpus:
            tf.config.experimental.set_memory_growth(gpu, True)
        tf.config.set_visible_devices(gpus[local_rank % len(gpus)], "GPU")
