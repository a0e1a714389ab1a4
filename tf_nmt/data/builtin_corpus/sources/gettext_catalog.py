"""UI/message catalogs: LibreOffice German UI (``lo_ui``) and GCC messages (``gcc``).

``.mo`` files map English msgids to German msgstrs (another language with ``lang``,
e.g. ``ru`` for the en-ru study in ``experiments/second_pair``); the file path plus msgid is
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


def language_catalogs(root: Path, lang: str = "de") -> Iterator[Path]:
    """``.mo`` files under ``root`` with a path component named ``lang`` (``.../ru/LC_MESSAGES/x.mo``)."""
    for path in sorted(Path(root).rglob("*.mo")):
        if lang in path.relative_to(root).parts:
            yield path


def extract_lo_ui(roots: Iterable[Path], lang: str = "de") -> Iterator[Pair]:
    """Pairs from ``libreoffice-l10n-<lang>`` resource catalogs."""
    for root in roots:
        for mo in language_catalogs(root, lang):
            yield from catalog_pairs(mo, "lo_ui", mo.stem, inner_underscore=True)


def extract_gcc(roots: Iterable[Path], lang: str = "de") -> Iterator[Pair]:
    """Pairs from ``gcc-*-locales`` catalogs of language ``lang``."""
    for root in roots:
        for mo in language_catalogs(root, lang):
            yield from catalog_pairs(mo, "gcc", mo.stem)
