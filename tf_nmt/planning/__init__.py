"""tf_nmt.planning: a performance model of one training step on N ranks (``tf-nmt plan``).

* :mod:`.network`: named network presets (latency alpha, bandwidth beta);
* :mod:`.model`: the alpha-beta cost of ring allreduce and allgather (hierarchical where ranks
  share a node), Horovod's tensor fusion and cycle time, overlap with backward, and the scaling
  table over N;
* :mod:`.probe`: the measured compute of one step on this machine, and the gradient bytes per
  comm mode counted from the model's real variables.
"""
