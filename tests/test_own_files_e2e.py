"""The user's path from the docs (docs/own-data.md), end to end through the command line:
own text files (several per split, one gzipped, a TSV test set) -> prepare-data -> train a few
steps (the loss falls) -> evaluate (BLEU with the pair's languages) -> export -> translate."""
import gzip
import json

import pytest

from tests.data.own_corpus_fixture import en_fr_pairs
from tests.helpers import train_tiny_own_run
from tf_nmt.cli import main

pytestmark = pytest.mark.slow  # prepares, trains, exports: about a minute


def write_lines(path, lines):
    data = "".join(f"{line}\n" for line in lines).encode("utf-8")
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)


def test_own_files_prepare_train_evaluate_export_translate(tmp_path, capsys):
    pairs = en_fr_pairs()
    test, train = pairs[:8], pairs[8:]
    files = tmp_path / "files"
    files.mkdir()
    halves = {"a": train[:40], "b": train[40:]}
    for name, ext in (("a", ""), ("b", ".gz")):
        write_lines(files / f"{name}.en{ext}", [s for s, _ in halves[name]])
        write_lines(files / f"{name}.fr{ext}", [t for _, t in halves[name]])
    write_lines(files / "test.tsv", [f"{s}\t{t}" for s, t in test])
    data, run, export = tmp_path / "data", tmp_path / "run", tmp_path / "export"

    assert main(["prepare-data", "--data-dir", str(data), "--src-lang", "en", "--tgt-lang", "fr",
                 "--train-src", str(files / "a.en"), str(files / "b.en.gz"),
                 "--train-tgt", str(files / "a.fr"), str(files / "b.fr.gz"),
                 "--test-tsv", str(files / "test.tsv"), "--dev-size", "6",
                 "--vocab-size", "300", "--num-shards", "2", "--workers", "1"]) == 0
    manifest = json.loads((data / "corpus" / "manifest.json").read_text())
    assert (manifest["src_lang"], manifest["tgt_lang"]) == ("en", "fr")
    assert manifest["splits"]["dev"] == {"pairs": 6, "origin": "carved from train"}
    assert manifest["splits"]["train"]["pairs"] == len(train) - 6
    assert manifest["splits"]["test"]["pairs"] == len(test)

    train_tiny_own_run(data, run)
    assert json.loads((run / "meta.json").read_text())["languages"] == ["en", "fr"]

    report_path = tmp_path / "test.json"
    assert main(["evaluate", "--run-dir", str(run), "--split", "test", "--beam-size", "1",
                 "--output-json", str(report_path)]) == 0
    report = json.loads(report_path.read_text())
    assert report["languages"] == ["en", "fr"] and report["sentences"] == len(test)
    assert report["bleu_tokenize"] == "13a"

    assert main(["export", "--run-dir", str(run), "--export-dir", str(export)]) == 0
    source = tmp_path / "in.en"
    write_lines(source, [s for s, _ in test])
    out = tmp_path / "out.fr"
    assert main(["translate", "--export-dir", str(export), "--input", str(source),
                 "--output", str(out)]) == 0
    translations = out.read_text(encoding="utf-8").splitlines()
    assert len(translations) == len(test) and all(t.strip() for t in translations)
