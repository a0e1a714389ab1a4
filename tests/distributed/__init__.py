"""Single-process tests of tf_nmt.distributed."""
