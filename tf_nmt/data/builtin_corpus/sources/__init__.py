"""Per-source extractors; each yields :class:`~tf_nmt.data.builtin_corpus.pairs.Pair` records."""
