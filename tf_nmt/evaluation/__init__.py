"""tf_nmt.evaluation."""
