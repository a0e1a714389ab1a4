"""Corpus BLEU and chrF with sacreBLEU, plus the copy-the-source baseline the quickstart must beat."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import sacrebleu


@dataclass(frozen=True)
class BleuScore:
    score: float
    signature: str
    text: str


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> BleuScore:
    """Detokenised corpus BLEU (sacreBLEU defaults: 13a tokenisation, exp smoothing)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    metric = sacrebleu.metrics.BLEU()
    result = metric.corpus_score(list(hypotheses), [list(references)])
    return BleuScore(result.score, str(metric.get_signature()), str(result))


def copy_baseline(sources: Sequence[str], references: Sequence[str]) -> BleuScore:
    """BLEU of copying the English source unchanged as the "translation"."""
    return corpus_bleu(sources, references)


def corpus_chrf(hypotheses: Sequence[str], references: Sequence[str]) -> BleuScore:
    """Detokenised corpus chrF (character n-gram F-score): more sensitive than BLEU while a model
    is still weak, so early progress shows before 4-gram matches do."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    metric = sacrebleu.metrics.CHRF()
    result = metric.corpus_score(list(hypotheses), [list(references)])
    return BleuScore(result.score, str(metric.get_signature()), str(result))
