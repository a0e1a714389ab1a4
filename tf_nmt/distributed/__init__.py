"""tf_nmt.distributed."""
