"""tf-nmt's distributed layer: one API for single-process and ``horovodrun`` runs.

Without Horovod (or with one process) every helper is a no-op and Horovod is never imported, so
callers never branch on the world size. The public surface:

* **who am I** — :func:`init` (auto-detects ``horovodrun``/``mpirun``), :func:`current`,
  :class:`DistContext` (rank, size, ``is_chief``, ``distributed``), :data:`SINGLE`,
  :func:`horovod_available`, :func:`launch_info`;
* **collectives** — :func:`broadcast_variables`, :func:`allreduce_mean`, :func:`allreduce_sum`,
  :func:`barrier`;
* **data** — :func:`check_shards` (refuse splits that leave a rank without data).

The rest lives in submodules, each the one home of its decision:

* :mod:`tf_nmt.distributed.comm` — gradient communication (``train.comm``): ``wrap_optimizer``
  and ``comm_callbacks``, the only entry point ``model.fit`` code uses;
* :mod:`tf_nmt.distributed.accounting` — every byte formula of the gradient exchange;
* :mod:`~tf_nmt.distributed.ps_cluster`, :mod:`~tf_nmt.distributed.async_sgd`,
  :mod:`~tf_nmt.distributed.global_accumulator` — asynchronous SGD on a parameter-server cluster.

Launching ranks (``horovodrun``/``mpirun`` command lines) and measuring what Horovod moves are
research tools, not part of the package: ``experiments/lib/launcher.py``,
``experiments/lib/timeline.py`` and ``experiments/accumulation/horovod_traffic.py``.

Typical use in a trainer::

    ctx = distributed.init()                                   # auto-detects horovodrun
    settings = comm.resolve_comm(cfg.train)
    model.compile(optimizer=comm.wrap_optimizer(optimizer, settings, ctx), ...)
    callbacks = comm.comm_callbacks(settings, ctx) + (chief_callbacks if ctx.is_chief else [])
"""
from tf_nmt.distributed.context import (SINGLE, DistContext, current, horovod_available, init,
                                        launch_info)
from tf_nmt.distributed.sharding import check_shards
from tf_nmt.distributed.sync import allreduce_mean, allreduce_sum, barrier, broadcast_variables

__all__ = [
    "DistContext", "SINGLE", "init", "current", "horovod_available", "launch_info",
    "broadcast_variables", "allreduce_mean", "allreduce_sum", "barrier",
    "check_shards",
]
