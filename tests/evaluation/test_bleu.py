"""sacreBLEU wrappers: the scores are sacreBLEU's own, mismatched inputs are refused."""
import pytest
import sacrebleu

from tf_nmt.evaluation.bleu import copy_baseline, corpus_bleu, corpus_chrf

REFS = ["Die Datei ist neu.", "Der Hund ist alt.", "Das Fenster ist leer."]
HYPS = ["Die Datei ist neu.", "Der Hund ist groß.", "Ein Fenster ist leer."]


def test_bleu_is_sacrebleus_corpus_score():
    score = corpus_bleu(HYPS, REFS)
    expected = sacrebleu.corpus_bleu(HYPS, [REFS])
    assert score.score == pytest.approx(expected.score)
    assert 0 < score.score < 100
    assert "tok:13a" in score.signature and score.text.startswith("BLEU = ")


def test_perfect_and_empty_translations():
    assert corpus_bleu(REFS, REFS).score == pytest.approx(100.0)
    assert corpus_bleu(["", "", ""], REFS).score == pytest.approx(0.0)


def test_chrf_is_sacrebleus_and_more_lenient_than_bleu_on_near_misses():
    near = ["Die Dateien sind neu.", "Der Hunde ist alt.", "Das Fenster sind leer."]
    chrf = corpus_chrf(near, REFS)
    assert chrf.score == pytest.approx(sacrebleu.corpus_chrf(near, [REFS]).score)
    assert chrf.score > corpus_bleu(near, REFS).score


def test_copy_baseline_scores_the_source_as_the_translation():
    sources = ["The file is new.", "The dog is old.", "The window is empty."]
    assert copy_baseline(sources, REFS).score == pytest.approx(corpus_bleu(sources, REFS).score)


@pytest.mark.parametrize("metric", [corpus_bleu, corpus_chrf])
def test_length_mismatch_is_refused(metric):
    with pytest.raises(ValueError, match="2 hypotheses but 3 references"):
        metric(HYPS[:2], REFS)
