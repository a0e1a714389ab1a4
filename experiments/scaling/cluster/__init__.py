"""Scaling studies: an emulated multi-host cluster (network namespaces) and starting ranks in
it, a throughput worker, efficiency arithmetic and plots. Command lines and rank environments
for this machine or a real cluster come from :mod:`experiments.lib.launcher`."""
