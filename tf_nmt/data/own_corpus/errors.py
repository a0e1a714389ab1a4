"""The one exception of own-corpus preparation (a user-fixable problem, printed as one line)."""
from tf_nmt.errors import UserError


class OwnCorpusError(UserError, ValueError):
    """Unusable own-corpus input (bad file, line counts that differ) or a data dir it may not replace."""
