"""The one exception type of the corpus package."""


class CorpusError(ValueError):
    """Raised for unusable corpus input: missing/malformed files, failed downloads."""
