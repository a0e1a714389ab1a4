"""Which Debian packages feed which source, and the extractor for each."""
from collections import Counter
from pathlib import Path
from typing import Callable, Dict, Iterator, List, NamedTuple, Tuple

from ..pairs import Pair
from . import ding, gettext_catalog, gnome_docs, handbook, libreoffice_help

Roots = Dict[str, Path]


class SourceSpec(NamedTuple):
    """A named source: the packages it needs and how to turn their roots into pairs
    (``extract(roots, dropped)``: what it skips as unreadable is counted by reason in the
    Counter ``dropped``)."""

    name: str
    packages: Tuple[str, ...]
    extract: Callable[[Roots, Counter], Iterator[Pair]]


SOURCES: List[SourceSpec] = [
    SourceSpec("ding", ("trans-de-en",), lambda r, _dropped: ding.extract([r["trans-de-en"]])),
    SourceSpec("lo_help", ("libreoffice-help-en-us", "libreoffice-help-de"),
               lambda r, _dropped: libreoffice_help.extract([r["libreoffice-help-en-us"]],
                                                            [r["libreoffice-help-de"]])),
    SourceSpec("lo_ui", ("libreoffice-l10n-de",),
               lambda r, _dropped: gettext_catalog.extract_lo_ui([r["libreoffice-l10n-de"]])),
    SourceSpec("gcc", ("gcc-12-locales",),
               lambda r, _dropped: gettext_catalog.extract_gcc([r["gcc-12-locales"]])),
    SourceSpec("handbook", ("debian-handbook",),
               lambda r, _dropped: handbook.extract([r["debian-handbook"]])),
    SourceSpec("gnome", ("gnome-user-docs",),
               lambda r, dropped: gnome_docs.extract([r["gnome-user-docs"]], dropped)),
]


def all_packages() -> List[str]:
    """Every package any source needs, in a stable order."""
    seen: List[str] = []
    for spec in SOURCES:
        seen.extend(p for p in spec.packages if p not in seen)
    return seen
