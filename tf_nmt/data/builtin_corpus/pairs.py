"""The record every source extractor yields."""
from typing import NamedTuple


class Pair(NamedTuple):
    """One aligned segment pair.

    ``group`` ties pairs that must land in the same split (e.g. one dictionary
    entry); ``source`` names the extractor (ding, lo_help, lo_ui, gcc, handbook, gnome).
    """

    en: str
    de: str
    source: str
    group: str
