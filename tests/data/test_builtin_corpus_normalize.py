"""Text clean-up, pair filters and sentence splitting of the corpus builder."""
from tf_nmt.data.builtin_corpus.normalize import clean_text, match_key, reject_reason, strip_accelerators
from tf_nmt.data.builtin_corpus.segment import align_sentences, split_sentences


def test_clean_text_strips_markup_entities_and_whitespace():
    assert clean_text("<b>Save</b>  &amp;\n close <a href='x'>now</a>") == "Save & close now"


def test_clean_text_is_nfc_and_drops_controls():
    assert clean_text("Gro\u0308\u00dfe\u200b\u00a0Datei") == "Größe Datei"


def test_accelerators_removed_but_identifiers_kept():
    assert strip_accelerators("~Open") == "Open"
    assert strip_accelerators("Ö~ffnen") == "Öffnen"
    assert strip_accelerators("_File and &Edit") == "File and Edit"
    assert strip_accelerators("file_name AT&T %s") == "file_name AT&T %s"
    assert strip_accelerators("Re_place", inner_underscore=True) == "Replace"


def test_format_placeholders_survive():
    assert clean_text("cannot open %qs for %<writing%>") == "cannot open %qs for %<writing%>"


def test_reject_reasons():
    assert reject_reason("", "Haus") == "empty"
    assert reject_reason("Open", "Open") == "untranslated"
    assert reject_reason("123", "123.") == "no_letters"
    assert reject_reason("word " * 151, "Wort " * 151) == "too_long"
    assert reject_reason("Go", "Dies ist eine viel zu lange Übersetzung") == "length_ratio"
    assert reject_reason("Open file", "Datei öffnen") is None


def test_match_key_ignores_case_and_space():
    assert match_key(" The  House ") == match_key("the house")


def test_sentence_split_and_alignment():
    assert split_sentences("Er kam am 17. September an. Dann ging er.") == [
        "Er kam am 17. September an.", "Dann ging er."]
    assert align_sentences("A b. C d.", "E f. G h.") == [("A b.", "E f."), ("C d.", "G h.")]
    assert align_sentences("A b. C d.", "E f g h.") == [("A b. C d.", "E f g h.")]
