"""experiments/second_pair/build.py on hand-made Russian 'packages' (no network, no .debs): the
built-in extractors pointed at ``ru``, Cyrillic sentence splitting, and held-out pages that
cannot leak into train."""
from __future__ import annotations

from pathlib import Path

import pytest

from experiments.second_pair import build
from tf_nmt.data.builtin_corpus.segment import align_sentences, split_sentences
from tests.helpers import read_lines, serve_fake_debs
from tf_nmt.data.builtin_corpus.sources.mo_file import write_mo

HELP_PAGE = """<!DOCTYPE html><html><body>
<h1 id="hd_id{n}0">{title}</h1>
<p id="par_id{n}1">{first} {second}</p>
<p id="par_id{n}2">{third}</p>
</body></html>"""

# (page, English, Russian): title, two sentences of one paragraph, a third sentence.
PAGES = [(f"p{n}", (f"Page {n}", f"Open file {n} first.", f"Then close window {n} here.", f"Save document {n} now."),
          (f"Страница {n}", f"Откройте файл {n} сначала.", f"Затем закройте окно {n} здесь.", f"Сохраните документ {n} сейчас."))
         for n in range(12)]


def _help_page(n: int, title: str, first: str, second: str, third: str) -> str:
    return HELP_PAGE.format(n=n, title=title, first=first, second=second, third=third)


def fake_packages(base: Path) -> dict:
    """Unpacked-package trees with en/ru (and German distractors that must never be read)."""
    roots = {pkg: base / pkg for pkg in build.packages(build.ru_sources())}

    def put(pkg: str, rel: str, text: str) -> None:
        path = roots[pkg] / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    for n, (page, en, ru) in enumerate(PAGES):
        put("libreoffice-help-en-us", f"usr/share/libreoffice/help/en-US/text/{page}.html", _help_page(n, *en))
        put("libreoffice-help-ru", f"usr/share/libreoffice/help/ru/text/{page}.html", _help_page(n, *ru))
    put("debian-handbook", "usr/share/doc/debian-handbook/html/en-US/apt.html",
        "<html><body><p>APT installs packages.</p></body></html>")
    put("debian-handbook", "usr/share/doc/debian-handbook/html/ru-RU/apt.html",
        "<html><body><p>APT устанавливает пакеты.</p></body></html>")
    put("debian-handbook", "usr/share/doc/debian-handbook/html/de-DE/apt.html",
        "<html><body><p>APT installiert Pakete.</p></body></html>")
    mallard = '<page xmlns="http://projectmallard.org/1.0/"><title>{}</title><p>{}</p></page>'
    put("gnome-user-docs", "usr/share/help/C/gnome-help/net.page", mallard.format("Networking", "Connect to Wi-Fi."))
    put("gnome-user-docs", "usr/share/help/ru/gnome-help/net.page", mallard.format("Сеть", "Подключитесь к Wi-Fi."))
    catalogs = [
        ("libreoffice-l10n-ru", "usr/lib/libreoffice/program/resource/ru/LC_MESSAGES/sw.mo",
         {"": "header", "~Insert Table": "Вставить ~таблицу", "OK": "OK"}),
        ("gcc-12-locales", "usr/share/locale/ru/LC_MESSAGES/gcc-12.mo", {"cannot open %s": "не удаётся открыть %s"}),
        ("gcc-12-locales", "usr/share/locale/de/LC_MESSAGES/gcc-12.mo", {"cannot open %s": "%s kann nicht geöffnet werden"}),
        ("coreutils", "usr/share/locale/ru/LC_MESSAGES/coreutils.mo", {"missing operand": "пропущен операнд"}),
    ]
    for pkg, rel, messages in catalogs:
        (roots[pkg] / rel).parent.mkdir(parents=True, exist_ok=True)
        write_mo(roots[pkg] / rel, messages)
    for pkg in roots:
        roots[pkg].mkdir(parents=True, exist_ok=True)
    return roots


@pytest.fixture
def fake_debs(tmp_path, monkeypatch):
    roots = fake_packages(tmp_path / "roots")
    serve_fake_debs(monkeypatch, roots)
    return roots


def test_russian_sentences_split_and_align():
    assert split_sentences("Нажмите кнопку ОК. Теперь можно применять стиль.") == [
        "Нажмите кнопку ОК.", "Теперь можно применять стиль."]
    assert split_sentences("Это задаётся в 2022 г. Ёлка зелёная, т. е. Свет горит.") == [
        "Это задаётся в 2022 г. Ёлка зелёная, т. е. Свет горит."]
    assert align_sentences("Click OK. Then apply it.", "Нажмите ОК. Затем примените его.") == [
        ("Click OK.", "Нажмите ОК."), ("Then apply it.", "Затем примените его.")]


def test_build_extracts_en_ru_from_every_source_and_holds_out_whole_pages(tmp_path, fake_debs):
    logs = []
    stats = build.build(tmp_path / "out", tmp_path / "cache", dev_size=2, test_size=3, seed=7,
                        log=logs.append)
    out = tmp_path / "out"
    files = {split: {e: read_lines(out / f"{split}.{e}") for e in ("en", "ru", "meta.tsv")}
             for split in ("train", "dev", "test")}
    for split, f in files.items():
        assert len(f["en"]) == len(f["ru"]) == len(f["meta.tsv"]) == stats["splits"][split]
    train = set(zip(files["train"]["en"], files["train"]["ru"]))
    assert {("Insert Table", "Вставить таблицу"), ("cannot open %s", "не удаётся открыть %s"),
            ("APT installs packages.", "APT устанавливает пакеты."),
            ("Connect to Wi-Fi.", "Подключитесь к Wi-Fi."),
            ("missing operand", "пропущен операнд")} <= train
    everything = {p for f in files.values() for p in zip(f["en"], f["ru"])}
    assert not any("geöffnet" in ru or "installiert" in ru for _, ru in everything)
    assert ("OK", "OK") not in everything  # untranslated
    # a paragraph of two sentences became two sentence pairs
    assert ("Open file 0 first.", "Откройте файл 0 сначала.") in everything
    assert ("Then close window 0 here.", "Затем закройте окно 0 здесь.") in everything
    # dev and test: whole LibreOffice help pages, never sharing a page or a side with train
    pages = {split: {line.split("\t")[1] for line in files[split]["meta.tsv"]} for split in files}
    assert all(g.startswith("lo_help:text/") and "#" not in g for s in ("dev", "test") for g in pages[s])
    assert not pages["dev"] & pages["test"] and not (pages["dev"] | pages["test"]) & pages["train"]
    assert stats["splits"]["test"] >= 3 and stats["splits"]["dev"] >= 2
    assert stats["held_out_documents"]["test"] == len(pages["test"])
    held = {s.casefold() for split in ("dev", "test") for e in ("en", "ru") for s in files[split][e]}
    assert not any(en.casefold() in held or ru.casefold() in held for en, ru in train)
    assert set(stats["sources"]) == {"lo_help", "lo_ui", "gcc", "handbook", "gnome", "gnu"}
    assert stats["raw_pairs"]["gcc"] == 1 and stats["raw_pairs"]["lo_help"] == 4 * len(PAGES)
    assert any("source" in line and "total" in line for line in logs)


def test_study_runs_prepare_data_on_the_built_files_and_trains_on_a_budget(tmp_path):
    from experiments.second_pair import study

    args = study.prepare_args(Path("c"), Path("d"), 8000)
    assert args[:7] == ["prepare-data", "--data-dir", "d", "--src-lang", "en", "--tgt-lang", "ru"]
    flags = dict(zip(args[7::2], args[8::2]))
    assert flags == {"--train-src": "c/train.en", "--train-tgt": "c/train.ru",
                     "--dev-src": "c/dev.en", "--dev-tgt": "c/dev.ru", "--test-src": "c/test.en",
                     "--test-tgt": "c/test.ru", "--vocab-size": "8000"}
    real = study.train_settings(15, tiny=False, overrides=["train.seed=7"])
    assert "train.time_budget_minutes=15" in real and real[-1] == "train.seed=7"
    assert not any(s.startswith("model.") for s in real)
    assert any(s.startswith("model.d_model=") for s in study.train_settings(1, tiny=True, overrides=[]))
    for split in ("train", "dev", "test"):
        for lang in ("en", "ru"):
            (tmp_path / f"{split}.{lang}").write_text("".join(f"{split} {lang} {i}\n" for i in range(5)),
                                                      encoding="utf-8")
    small = study.tiny_corpus(tmp_path, tmp_path / "tiny", 2)
    assert (small / "train.ru").read_text(encoding="utf-8") == "train ru 0\ntrain ru 1\n"
    assert len((small / "test.en").read_text(encoding="utf-8").splitlines()) == 5


def test_roundtrip_report_lists_what_does_not_come_back():
    from experiments.second_pair.study import has_cyrillic, roundtrip_report

    texts = ["Нажмите ОК.", "№ 5", "plain"]
    nfkc = lambda batch: [t.replace("№", "No") for t in batch]  # what NFKC would do to №
    report = roundtrip_report(texts, nfkc, lambda ids: ids)
    assert report == {"sentences": 3, "exact": 2, "cyrillic_sentences": 1,
                      "failures": [{"text": "№ 5", "decoded": "No 5"}]}
    assert has_cyrillic("Ёж") and not has_cyrillic("Öl")
