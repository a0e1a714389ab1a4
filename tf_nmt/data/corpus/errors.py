"""The one exception type of the corpus package."""
from tf_nmt.errors import UserError


class CorpusError(UserError, ValueError):
    """Raised for unusable corpus input: missing/malformed files, failed downloads."""
