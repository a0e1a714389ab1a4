"""Corpus BLEU and chrF with sacreBLEU, plus the copy-the-source baseline the quickstart must beat."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import sacrebleu


@dataclass(frozen=True)
class BleuScore:
    score: float
    signature: str
    text: str


#: sacreBLEU tokenizers for targets that 13a (space-separated words) would score as one word
#: per sentence; Japanese and Korean need MeCab (``pip install sacrebleu[ja]`` / ``[ko]``).
LANGUAGE_TOKENIZERS = {"zh": "zh", "ja": "ja-mecab", "ko": "ko-mecab"}
FALLBACK_TOKENIZER = "char"


def tokenizer_for(target_language: str) -> Tuple[str, Optional[str]]:
    """(sacreBLEU tokenizer, why it is a fallback or None) for a target language: ``zh`` for
    Chinese, ``ja-mecab``/``ko-mecab`` for Japanese/Korean when importable (else ``char``),
    ``13a`` (sacreBLEU's default) for everything else."""
    wanted = LANGUAGE_TOKENIZERS.get(target_language.lower().split("-")[0], "13a")
    try:
        sacrebleu.metrics.BLEU(tokenize=wanted)
    except Exception:  # noqa: BLE001 - sacreBLEU raises RuntimeError/ImportError variants
        lang = target_language.lower().split("-")[0]
        return FALLBACK_TOKENIZER, (f"sacreBLEU's {wanted} tokenizer is not available (pip "
                                    f"install 'sacrebleu[{lang}]'): BLEU uses "
                                    f"{FALLBACK_TOKENIZER} instead")
    return wanted, None


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str],
                tokenize: str = "13a") -> BleuScore:
    """Detokenised corpus BLEU (sacreBLEU defaults: exp smoothing; ``tokenize`` 13a unless the
    target language needs another, :func:`tokenizer_for`)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    metric = sacrebleu.metrics.BLEU(tokenize=tokenize)
    result = metric.corpus_score(list(hypotheses), [list(references)])
    return BleuScore(result.score, str(metric.get_signature()), str(result))


def copy_baseline(sources: Sequence[str], references: Sequence[str],
                  tokenize: str = "13a") -> BleuScore:
    """BLEU of copying the source unchanged as the "translation"."""
    return corpus_bleu(sources, references, tokenize)


def corpus_chrf(hypotheses: Sequence[str], references: Sequence[str]) -> BleuScore:
    """Detokenised corpus chrF (character n-gram F-score): more sensitive than BLEU while a model
    is still weak, so early progress shows before 4-gram matches do."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    metric = sacrebleu.metrics.CHRF()
    result = metric.corpus_score(list(hypotheses), [list(references)])
    return BleuScore(result.score, str(metric.get_signature()), str(result))
