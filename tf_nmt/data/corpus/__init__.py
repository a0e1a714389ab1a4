"""tf_nmt.data.corpus."""
