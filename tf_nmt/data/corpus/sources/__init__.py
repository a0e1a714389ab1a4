"""Per-source extractors; each yields :class:`~tf_nmt.data.corpus.pairs.Pair` records."""
