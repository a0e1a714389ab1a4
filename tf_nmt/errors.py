"""The exception a user can fix: the one family the command line turns into a one-line message.

Anything else (a ValueError from deep inside TensorFlow, a bug) keeps its traceback, so internal
errors are never disguised as bad input. Each error type lives next to what it checks
(``ConfigError`` in :mod:`tf_nmt.config`, ``RunDirError`` in :mod:`tf_nmt.run_dir`...) and
derives from :class:`UserError`.
"""
from __future__ import annotations


class UserError(Exception):
    """A problem with what the user asked for: bad config, input files, run directory or flags."""


class UsageError(UserError, ValueError):
    """Command-line flags that do not fit together (e.g. a missing required combination)."""
