"""Sentence splitting used to break aligned paragraphs into sentence pairs."""
import re
from typing import List, Tuple

# A sentence starts with a Latin (German) or Cyrillic (Russian) capital; the Cyrillic ones and
# the Russian abbreviations (т. е., см., рис. ...) serve the en-ru corpus of experiments/second_pair.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"'”“»«)]?\s+(?=[\"'„“»«(]?[A-ZÄÖÜА-ЯЁ])")
_ABBREV = re.compile(r"(?:\b(?:e\.g|i\.e|z\.\s?B|d\.\s?h|u\.\s?a|bzw|ca|etc|vs|Nr|Abb|Dr|Mr|Mrs|St|S"
                     r"|т\.\s?е|т\.\s?д|т\.\s?п|т\.\s?к|см|напр|рис|стр|гл|прим|разд|г)\.|\b\d+\.)$")


def split_sentences(text: str) -> List[str]:
    """Split on sentence punctuation followed by a capital, skipping common abbreviations."""
    pieces, start = [], 0
    for match in _BOUNDARY.finditer(text):
        head = text[start:match.start()].rstrip("\"'”“»«)")
        if _ABBREV.search(head):
            continue
        pieces.append(text[start:match.start()].strip())
        start = match.end()
    pieces.append(text[start:].strip())
    return [p for p in pieces if p]


def align_sentences(en: str, de: str) -> List[Tuple[str, str]]:
    """Sentence pairs when both sides split into the same count, else the paragraph pair."""
    en_s, de_s = split_sentences(en), split_sentences(de)
    if len(en_s) > 1 and len(en_s) == len(de_s):
        return list(zip(en_s, de_s))
    return [(en, de)]
