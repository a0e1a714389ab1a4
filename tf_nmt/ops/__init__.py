"""tf_nmt.ops."""
