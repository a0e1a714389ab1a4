"""tf_nmt.training."""
