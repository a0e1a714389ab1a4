"""tf_nmt.export."""
