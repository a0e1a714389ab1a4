"""Each source extractor on the hand-made fixtures in tests/fixtures/corpus."""
from pathlib import Path

from tf_nmt.data.builtin_corpus.sources import ding, gnome_docs, handbook, libreoffice_help
from tf_nmt.data.builtin_corpus.sources.gettext_catalog import catalog_pairs
from tf_nmt.data.builtin_corpus.sources.mo_file import read_mo, translation_entries, write_mo

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"


def test_ding_keeps_aligned_sentences_only():
    pairs = list(ding.read_dictionary(FIXTURES / "ding.txt"))
    got = {(p.en, p.de) for p in pairs}
    assert ("The house is old.", "Das Haus ist alt.") in got
    assert ("She gave him the book yesterday as a present.", "Sie hat ihm das Buch gestern geschenkt.") in got
    assert ("It is supposed to rain tomorrow.", "Morgen wird es wohl regnen.") in got
    assert not any("sth." in en or en == "house" for en, _ in got)
    assert {p.group for p in pairs if p.en == "The house is old."} == {"ding:2", "ding:8"}


def test_ding_line_parser_rejects_mismatched_lists():
    assert ding.parse_line("A | Der Satz ist hier. :: a") == []
    assert ding.parse_line("# comment :: x") == []


def test_mo_roundtrip_skips_header_context_and_plural(tmp_path):
    path = tmp_path / "x.mo"
    write_mo(path, {"": "Content-Type: text/plain; charset=UTF-8\n", "~Open": "Ö~ffnen",
                    "menu\x04_Save": "_Speichern", "%d file\x00%d files": "%d Datei\x00%d Dateien",
                    "Untranslated": ""})
    assert len(read_mo(path)) == 5
    assert sorted(translation_entries(path)) == [
        ("%d file", "%d Datei"), ("_Save", "_Speichern"), ("~Open", "Ö~ffnen")]
    cleaned = {(p.en, p.de) for p in catalog_pairs(path, "lo_ui", "x", inner_underscore=True)}
    assert ("Open", "Öffnen") in cleaned and ("Save", "Speichern") in cleaned


def test_libreoffice_help_aligns_by_paragraph_id():
    pairs = list(libreoffice_help.align_help(FIXTURES / "lo_help" / "en-US", FIXTURES / "lo_help" / "de"))
    got = {(p.en, p.de) for p in pairs}
    assert ("Choose Tools - Options.", "Wählen Sie Extras – Optionen.") in got
    assert ("Insert Table", "Tabelle einfügen") in got
    assert ("Inserts a table into the document.", "Fügt eine Tabelle in das Dokument ein.") in got
    assert not any("English" in en for en, _ in got)


def test_handbook_aligns_by_structure_and_skips_code():
    root = FIXTURES / "handbook"
    pairs = list(handbook.pair_blocks(handbook.page_blocks(root / "en-US" / "apt.html"),
                                      handbook.page_blocks(root / "de-DE" / "apt.html"), "handbook", "t"))
    got = {(p.en, p.de) for p in pairs}
    assert ("APT is a package manager.", "APT ist ein Paket-Manager.") in got
    assert ("It downloads packages.", "Es lädt Pakete herunter.") in got
    assert ("6.1. Using APT", "6.1. APT verwenden") in got


def test_gnome_pages_align_despite_translator_credits():
    root = FIXTURES / "gnome"
    pairs = list(gnome_docs.pair_blocks(gnome_docs.page_blocks(root / "C" / "intro.page"),
                                        gnome_docs.page_blocks(root / "de" / "intro.page"), "gnome", "g"))
    got = {(p.en, p.de) for p in pairs}
    assert got >= {("Learn the basics.", "Die Grundlagen lernen."), ("Getting started", "Erste Schritte"),
                   ("Press Enter.", "Drücken Sie die Eingabetaste.")}
    assert not any("Übersetzer" in de for _, de in got)


def test_gnome_counts_unparsable_pages(tmp_path):
    import shutil
    from collections import Counter

    help_dir = tmp_path / "pkg" / gnome_docs.HELP_ROOT
    shutil.copytree(FIXTURES / "gnome", help_dir)
    (help_dir / "C" / "broken.page").write_text("<page><title>Broken</title>", encoding="utf-8")
    (help_dir / "de" / "broken.page").write_text("<page><title>Kaputt</title></page>", encoding="utf-8")
    dropped = Counter()
    pairs = list(gnome_docs.extract([tmp_path / "pkg"], dropped))
    assert ("Getting started", "Erste Schritte") in {(p.en, p.de) for p in pairs}
    assert dropped == Counter({gnome_docs.UNPARSABLE: 1})
