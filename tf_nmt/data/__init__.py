"""tf_nmt.data."""
