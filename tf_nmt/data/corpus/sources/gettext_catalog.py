"""UI/message catalogs: LibreOffice German UI (``lo_ui``) and GCC messages (``gcc``).

``.mo`` files map English msgids to German msgstrs; the file path plus msgid is
the group. Fuzzy entries never reach a compiled ``.mo``, untranslated ones are
dropped later by the en == de filter.
"""
from pathlib import Path
from typing import Iterable, Iterator

from ..normalize import clean_text
from ..pairs import Pair
from .mo_file import translation_entries


def catalog_pairs(mo_path: Path, source: str, group_prefix: str,
                  inner_underscore: bool = False) -> Iterator[Pair]:
    """Cleaned pairs of one catalog."""
    for msgid, msgstr in translation_entries(mo_path):
        en = clean_text(msgid, inner_underscore=inner_underscore)
        de = clean_text(msgstr, inner_underscore=inner_underscore)
        yield Pair(en, de, source, f"{source}:{group_prefix}:{en}")


def _german_catalogs(root: Path) -> Iterator[Path]:
    for path in sorted(Path(root).rglob("*.mo")):
        if "de" in path.relative_to(root).parts:
            yield path


def extract_lo_ui(roots: Iterable[Path]) -> Iterator[Pair]:
    """Pairs from ``libreoffice-l10n-de`` resource catalogs."""
    for root in roots:
        for mo in _german_catalogs(root):
            yield from catalog_pairs(mo, "lo_ui", mo.stem, inner_underscore=True)


def extract_gcc(roots: Iterable[Path]) -> Iterator[Pair]:
    """Pairs from ``gcc-*-locales`` German catalogs."""
    for root in roots:
        for mo in _german_catalogs(root):
            yield from catalog_pairs(mo, "gcc", mo.stem)
