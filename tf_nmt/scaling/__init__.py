"""Scaling studies: an emulated multi-host cluster (network namespaces), rank launchers,
a throughput worker, efficiency arithmetic and plots."""
