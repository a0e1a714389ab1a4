"""The one exception type of the built-in corpus package (its readers of users' parallel files
raise it too)."""
from tf_nmt.errors import UserError


class CorpusError(UserError, ValueError):
    """Raised for unusable corpus input: missing/malformed files, failed downloads."""
