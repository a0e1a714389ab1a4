"""Text clean-up and the pair filters shared by all sources.

Every extracted side goes through :func:`clean_text`; every pair through
:func:`reject_reason` so that all sources obey one definition of "usable".
"""
import html
import re
import unicodedata
from typing import Optional

MAX_WORDS = 150
MAX_LENGTH_RATIO = 3.0
_RATIO_MIN_CHARS = 10

_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9:_-]*(?:\s[^<>]*)?/?>")
_WS = re.compile(r"\s+")
_TILDE = re.compile(r"~(?=\w)")
_WORD_START_MARK = re.compile(r"(?<![\w&])[_&](?=[^\W\d_])")
_INNER_UNDERSCORE = re.compile(r"(?<=[^\W\d_])_(?=[^\W\d_])")
_LETTER = re.compile(r"[^\W\d_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b\u00ad\ufeff]")


def strip_markup(text: str) -> str:
    """Remove XML/HTML tags and decode entities (``&amp;`` -> ``&``)."""
    return html.unescape(_TAG.sub(" ", text))


def strip_accelerators(text: str, inner_underscore: bool = False) -> str:
    """Drop menu mnemonics: ``~`` before a letter, word-initial ``_``/``&``.

    ``inner_underscore`` also removes ``_`` between two letters (GTK ``Re_place``),
    which is only safe for UI catalogs, not for text that may name identifiers.
    """
    text = _TILDE.sub("", text)
    text = _WORD_START_MARK.sub("", text)
    if inner_underscore:
        text = _INNER_UNDERSCORE.sub("", text)
    return text


def normalize_space(text: str) -> str:
    """NFC, control characters out, runs of whitespace to one space, trimmed."""
    text = unicodedata.normalize("NFC", text)
    text = _CONTROL.sub("", text.replace("\u00a0", " "))
    return _WS.sub(" ", text).strip()


def clean_text(text: str, markup: bool = True, accelerators: bool = True,
               inner_underscore: bool = False) -> str:
    """Full clean-up of one side: markup, accelerators, Unicode and whitespace."""
    if markup:
        text = strip_markup(text)
    if accelerators:
        text = strip_accelerators(text, inner_underscore=inner_underscore)
    return normalize_space(text)


def match_key(text: str) -> str:
    """Case- and space-insensitive form used to detect dev/test leakage."""
    return normalize_space(text).casefold()


def reject_reason(en: str, de: str) -> Optional[str]:
    """Why a (cleaned) pair is unusable, or None if it is kept."""
    if not en or not de:
        return "empty"
    if not _LETTER.search(en) or not _LETTER.search(de):
        return "no_letters"
    if en == de:
        return "untranslated"
    if len(en.split()) > MAX_WORDS or len(de.split()) > MAX_WORDS:
        return "too_long"
    short, long_ = sorted((len(en), len(de)))
    if long_ > _RATIO_MIN_CHARS and long_ > MAX_LENGTH_RATIO * short:
        return "length_ratio"
    return None
