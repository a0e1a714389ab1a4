"""Gradient communication modes for distributed training (``train.comm``).

* ``dense`` / ``sparse_as_dense`` — Horovod's DistributedOptimizer (allreduce; embedding
  gradients allgathered or densified);
* ``graddrop`` — gradient dropping with error feedback over allgather, optionally with local
  gradients and periodic averaging, drop-ratio warm-up and 1-bit values (:mod:`.graddrop`);
* ``fedavg`` — local steps, parameters averaged every P steps (model averaging);
* ``bmuf`` — blockwise model-update filtering on top of the periodic average (:mod:`.averaging`).

Every mode reports bytes per step against dense allreduce (:mod:`.wire`, :class:`.CommStats`).
"""
from tf_nmt.distributed.comm.settings import COMM_MODES, CommSettings, resolve_comm
from tf_nmt.distributed.comm.wiring import comm_callbacks, wrap_optimizer

__all__ = ["COMM_MODES", "CommSettings", "resolve_comm", "comm_callbacks", "wrap_optimizer"]
