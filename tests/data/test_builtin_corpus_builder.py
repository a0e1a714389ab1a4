"""prepare_corpus end to end on fixture 'packages', its cache, and .deb lookup."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tf_nmt.data.builtin_corpus import CorpusError, builder, debian, prepare_corpus
from tests.helpers import read_lines, serve_fake_debs
from tf_nmt.data.builtin_corpus.sources.mo_file import write_mo

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"


def _fake_roots(base: Path) -> dict:
    """Lay the fixtures out like unpacked .debs."""
    roots = {}

    def place(pkg: str, rel: str, src: Path) -> None:
        roots[pkg] = base / pkg
        target = base / pkg / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy)(src, target)

    place("trans-de-en", "usr/share/trans/de-en", FIXTURES / "ding.txt")
    place("libreoffice-help-en-us", "usr/share/libreoffice/help/en-US", FIXTURES / "lo_help" / "en-US")
    place("libreoffice-help-de", "usr/share/libreoffice/help/de", FIXTURES / "lo_help" / "de")
    place("debian-handbook", "usr/share/doc/debian-handbook/html", FIXTURES / "handbook")
    place("gnome-user-docs", "usr/share/help", FIXTURES / "gnome")
    for pkg, rel, messages in [
            ("libreoffice-l10n-de", "usr/lib/libreoffice/program/resource/de/LC_MESSAGES/sw.mo",
             {"": "header", "~Open": "Ö~ffnen", "Insert Table": "Tabelle einfügen", "OK": "OK"}),
            ("gcc-12-locales", "usr/share/locale/de/LC_MESSAGES/gcc-12.mo",
             {"cannot open %s": "%s kann nicht geöffnet werden", "The house is old.": "Das Haus ist alt."})]:
        roots[pkg] = base / pkg
        (base / pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        write_mo(base / pkg / rel, messages)
    return roots


@pytest.fixture
def fake_debs(tmp_path, monkeypatch):
    roots = _fake_roots(tmp_path / "roots")
    serve_fake_debs(monkeypatch, roots)
    return roots


def test_prepare_corpus_writes_aligned_splits_and_caches(tmp_path, fake_debs, monkeypatch):
    logs = []
    stats = prepare_corpus(tmp_path / "data", dev_size=2, test_size=3, seed=5, log=logs.append)
    out = tmp_path / "data" / "corpus"
    for split in ("train", "dev", "test"):
        en, de, meta = (read_lines(out / f"{split}.{e}") for e in ("en", "de", "meta.tsv"))
        assert len(en) == len(de) == len(meta) == stats["splits"][split]
        assert all(line.split("\t")[0] in stats["sources"] for line in meta)
    assert stats["splits"]["test"] >= 3 and stats["splits"]["dev"] >= 2
    assert set(stats["sources"]) == {"ding", "lo_help", "lo_ui", "gcc", "handbook", "gnome"}
    assert json.loads((out / "stats.json").read_text()) == stats
    train = set(zip(read_lines(out / "train.en"), read_lines(out / "train.de")))
    assert ("Open", "Öffnen") in train and ("OK", "OK") not in train
    held = {s.lower() for split in ("dev", "test") for e in ("en", "de") for s in read_lines(out / f"{split}.{e}")}
    assert not any(en.lower() in held or de.lower() in held for en, de in train)
    assert any("source" in line and "total" in line for line in logs)

    def boom(*args, **kwargs):
        raise AssertionError("cache miss: extraction ran again")

    monkeypatch.setattr(builder, "extract_all", boom)
    monkeypatch.setattr(debian, "unpack_deb", boom)
    assert prepare_corpus(tmp_path / "data", dev_size=2, test_size=3, seed=5, log=logs.append) == stats
    with pytest.raises(AssertionError, match="cache miss"):
        prepare_corpus(tmp_path / "data", dev_size=2, test_size=3, seed=6, log=logs.append)


def test_locate_debs_prefers_given_dir_without_downloading(tmp_path, monkeypatch):
    given = tmp_path / "given"
    given.mkdir()
    (given / "trans-de-en_1.9-6_all.deb").write_bytes(b"")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("should not run apt-get"))
    found = debian.locate_debs(["trans-de-en"], tmp_path / "data", given, log=lambda m: None)
    assert found == {"trans-de-en": given / "trans-de-en_1.9-6_all.deb"}


def test_failed_download_updates_once_then_raises(tmp_path, monkeypatch):
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd[:2])
        return subprocess.CompletedProcess(cmd, 100, "", "E: Unable to locate package")

    monkeypatch.setattr(debian.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(debian.subprocess, "run", fake_run)
    with pytest.raises(CorpusError, match="apt-get download trans-de-en failed"):
        debian.locate_debs(["trans-de-en"], tmp_path / "data", None, log=lambda m: None)
    assert calls == [["apt-get", "download"], ["apt-get", "update"], ["apt-get", "download"]]


def _ar_member(name: str, body: bytes) -> bytes:
    header = f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(body):<10}`\n".encode()
    return header + body + (b"\n" if len(body) % 2 else b"")


def test_unpack_without_dpkg_deb_reads_ar_and_tar(tmp_path, monkeypatch):
    import io
    import tarfile
    payload = io.BytesIO()
    with tarfile.open(fileobj=payload, mode="w:gz") as tar:
        data = "Haus {n} :: house\n".encode()
        info = tarfile.TarInfo("./usr/share/trans/de-en")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    deb = tmp_path / "trans-de-en_1_all.deb"
    deb.write_bytes(b"!<arch>\n" + _ar_member("debian-binary", b"2.0\n")
                    + _ar_member("data.tar.gz", payload.getvalue()))
    monkeypatch.setattr(debian.shutil, "which", lambda name: None)
    root = debian.unpack_deb(deb, tmp_path / "unpacked" / "trans-de-en")
    assert (root / "usr/share/trans/de-en").read_text() == "Haus {n} :: house\n"
    assert (root / ".unpacked").exists()


def test_unparsable_source_pages_are_counted_in_stats_and_said(tmp_path, fake_debs):
    help_dir = fake_debs["gnome-user-docs"] / "usr/share/help"
    (help_dir / "C" / "broken.page").write_text("<page><p>unclosed", encoding="utf-8")
    (help_dir / "de" / "broken.page").write_text("<page><p>offen", encoding="utf-8")
    logs = []
    stats = prepare_corpus(tmp_path / "data", dev_size=2, test_size=3, seed=5, log=logs.append)
    assert stats["source_dropped"]["gnome"] == {"unparsable_page": 2}
    assert stats["source_dropped"]["ding"] == {}
    assert json.loads((tmp_path / "data" / "corpus" / "stats.json").read_text())["source_dropped"] \
        == stats["source_dropped"]
    assert any(line.strip().startswith("gnome") and "2 dropped (unparsable_page)" in line
               for line in logs), logs
