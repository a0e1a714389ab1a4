"""Gradient communication for distributed training: one entry point, one name per mode.

``train.comm`` selects the mode (the names are :data:`COMM_MODES`, defined with the key in
:mod:`tf_nmt.config`):

* ``sparse_as_dense`` (default) — Horovod's DistributedOptimizer; embedding gradients
  (IndexedSlices) are densified and allreduced like every other gradient;
* ``dense`` — Horovod's DistributedOptimizer; IndexedSlices are allgathered (values + indices),
  the rest allreduced;
* ``graddrop`` — gradient dropping with error feedback over allgather, optionally with local
  gradients and periodic averaging, drop-ratio warm-up and 1-bit values (:mod:`.graddrop`);
* ``fedavg`` — local steps, parameters averaged every P steps (model averaging);
* ``bmuf`` — blockwise model-update filtering on top of the periodic average (:mod:`.averaging`).

Use::

    settings = comm.resolve_comm(cfg.train)                 # validated once (ConfigError)
    optimizer = comm.wrap_optimizer(optimizer, settings, ctx)
    callbacks = comm.comm_callbacks(settings, ctx) + other_callbacks
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer,
                                     **comm.checkpoint_state(callbacks, model))  # BMUF's W, Δ

Every mode reports bytes per step against a dense allreduce (:class:`.callbacks.CommStats`;
the formulas are in :mod:`tf_nmt.distributed.accounting`).
"""
from tf_nmt.distributed.comm.settings import COMM_MODES, HOROVOD_MODES, CommSettings, resolve_comm
from tf_nmt.distributed.comm.wiring import checkpoint_state, comm_callbacks, wrap_optimizer

__all__ = ["COMM_MODES", "HOROVOD_MODES", "CommSettings", "resolve_comm", "comm_callbacks", "wrap_optimizer",
           "checkpoint_state"]
