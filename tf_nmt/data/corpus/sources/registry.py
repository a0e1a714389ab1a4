"""Which Debian packages feed which source, and the extractor for each."""
from pathlib import Path
from typing import Callable, Dict, Iterator, List, NamedTuple, Tuple

from ..pairs import Pair
from . import ding, gettext_catalog, gnome_docs, handbook, libreoffice_help

Roots = Dict[str, Path]


class SourceSpec(NamedTuple):
    """A named source: the packages it needs and how to turn their roots into pairs."""

    name: str
    packages: Tuple[str, ...]
    extract: Callable[[Roots], Iterator[Pair]]


SOURCES: List[SourceSpec] = [
    SourceSpec("ding", ("trans-de-en",), lambda r: ding.extract([r["trans-de-en"]])),
    SourceSpec("lo_help", ("libreoffice-help-en-us", "libreoffice-help-de"),
               lambda r: libreoffice_help.extract([r["libreoffice-help-en-us"]],
                                                  [r["libreoffice-help-de"]])),
    SourceSpec("lo_ui", ("libreoffice-l10n-de",),
               lambda r: gettext_catalog.extract_lo_ui([r["libreoffice-l10n-de"]])),
    SourceSpec("gcc", ("gcc-12-locales",), lambda r: gettext_catalog.extract_gcc([r["gcc-12-locales"]])),
    SourceSpec("handbook", ("debian-handbook",), lambda r: handbook.extract([r["debian-handbook"]])),
    SourceSpec("gnome", ("gnome-user-docs",), lambda r: gnome_docs.extract([r["gnome-user-docs"]])),
]


def all_packages() -> List[str]:
    """Every package any source needs, in a stable order."""
    seen: List[str] = []
    for spec in SOURCES:
        seen.extend(p for p in spec.packages if p not in seen)
    return seen
