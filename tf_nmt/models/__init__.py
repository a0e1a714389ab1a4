"""tf_nmt.models."""
