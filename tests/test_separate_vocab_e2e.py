"""Separate source/target vocabularies end to end through the command line (docs/own-data.md):
own files -> prepare-data --separate-vocab (sizes differ per side) -> train a few steps -> evaluate
-> export a SavedModel (and a packed 8-bit one) and translate with it -> CTranslate2 greedy
equals tf-nmt's greedy; and a data dir of the other vocabulary mode is refused by resume and
evaluate, a swapped run vocabulary by export."""
import json

import pytest

from tests.data.own_corpus_fixture import en_fr_pairs
from tests.helpers import train_tiny_own_run
from tests.test_own_files_e2e import write_lines
from tf_nmt.cli import main
from tf_nmt.data.tokenizer import TokenizerPair
from tf_nmt.quantization.packed_file import read_packed

pytestmark = pytest.mark.slow  # prepares, trains, exports: about a minute


def error_line(code, capsys) -> str:
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("tf-nmt: error:") and len(err.strip().splitlines()) == 1, err
    return err


def test_separate_vocab_prepare_train_evaluate_export_translate_and_refusals(tmp_path, capsys,
                                                                             monkeypatch):
    pairs = en_fr_pairs()
    test, train = pairs[:8], pairs[8:]
    files = tmp_path / "files"
    files.mkdir()
    write_lines(files / "train.en", [s for s, _ in train])
    write_lines(files / "train.fr", [t for _, t in train])
    write_lines(files / "test.tsv", [f"{s}\t{t}" for s, t in test])
    data, run = tmp_path / "data", tmp_path / "run"
    common = ["--src-lang", "en", "--tgt-lang", "fr", "--train-src", str(files / "train.en"),
              "--train-tgt", str(files / "train.fr"), "--test-tsv", str(files / "test.tsv"),
              "--dev-size", "6", "--num-shards", "2", "--workers", "1"]
    assert main(["prepare-data", "--data-dir", str(data), *common, "--separate-vocab",
                 "--src-vocab-size", "300", "--tgt-vocab-size", "310"]) == 0
    vocab = json.loads((data / "corpus" / "manifest.json").read_text())["vocab"]
    assert vocab["shared"] is False and (vocab["src"]["size"], vocab["tgt"]["size"]) == (300, 310)

    settings = train_tiny_own_run(data, run)
    meta = json.loads((run / "meta.json").read_text())
    assert meta["source_vocab_fingerprint"] == vocab["src"]["fingerprint"]
    assert meta["vocab_fingerprint"] == vocab["tgt"]["fingerprint"]
    assert (run / "source_vocab.model").read_bytes() == (data / vocab["src"]["path"]).read_bytes()
    assert (run / "vocab.model").read_bytes() == (data / vocab["tgt"]["path"]).read_bytes()

    report_path = tmp_path / "test.json"
    assert main(["evaluate", "--run-dir", str(run), "--split", "test", "--beam-size", "1",
                 "--output-json", str(report_path)]) == 0
    assert json.loads(report_path.read_text())["sentences"] == len(test)

    # SavedModel: string in, string out; the same translations as from the run directory
    export = tmp_path / "export"
    assert main(["export", "--run-dir", str(run), "--export-dir", str(export)]) == 0
    source = tmp_path / "in.en"
    write_lines(source, [s for s, _ in test])
    served, direct = tmp_path / "served.fr", tmp_path / "direct.fr"
    assert main(["translate", "--export-dir", str(export), "--input", str(source),
                 "--output", str(served)]) == 0
    assert main(["translate", "--run-dir", str(run), "--input", str(source),
                 "--output", str(direct)]) == 0
    assert served.read_text(encoding="utf-8") == direct.read_text(encoding="utf-8")
    assert len(served.read_text(encoding="utf-8").splitlines()) == len(test)

    # a packed (8-bit) model carries both vocabularies into its SavedModel
    packed_file, packed_export = tmp_path / "run.tfq", tmp_path / "packed"
    assert main(["quantize", "--run-dir", str(run), "--bits", "8", "--output",
                 str(packed_file)]) == 0
    assert read_packed(packed_file).source_vocab_proto == (run / "source_vocab.model").read_bytes()
    assert main(["export", "--quantized", str(packed_file), "--export-dir", str(packed_export)]) == 0
    quantized = tmp_path / "quantized.fr"
    assert main(["translate", "--export-dir", str(packed_export), "--input", str(source),
                 "--output", str(quantized)]) == 0
    assert len(quantized.read_text(encoding="utf-8").splitlines()) == len(test)

    _ctranslate2_greedy_matches(run, tmp_path / "ct2", [s for s, _ in pairs[:24]])
    _vocabulary_map_from_the_cli(run, data, source, tmp_path, common, capsys, monkeypatch)
    _other_vocab_mode_is_refused(run, data, tmp_path, common, vocab, settings, capsys)


def _vocabulary_map_from_the_cli(run, data, source, tmp_path, common, capsys, monkeypatch):
    """export --format ctranslate2 --vmap maps source pieces of the source vocabulary to target
    pieces; after the data dir is prepared again with another vocabulary, it is refused."""
    pytest.importorskip("ctranslate2")
    import sentencepiece as spm

    from tf_nmt.export import ct2_vmap

    monkeypatch.setattr(ct2_vmap, "ALWAYS", 20)  # else the tiny vocabulary is all always-on
    export = tmp_path / "ct2-vmap"
    assert main(["export", "--format", "ctranslate2", "--run-dir", str(run), "--export-dir",
                 str(export), "--vmap"]) == 0
    source_pieces = {p.split("\t")[0] for p in (export / "vmap.txt").read_text().splitlines()}
    sp = spm.SentencePieceProcessor(model_file=str(run / "source_vocab.model"))
    known = {sp.id_to_piece(i) for i in range(sp.get_piece_size())}
    assert len(source_pieces) > 10 and source_pieces - {""} <= known
    out = tmp_path / "vmap.fr"
    assert main(["translate", "--export-dir", str(export), "--input", str(source), "--output",
                 str(out)]) == 0
    assert "vocabulary map on" in capsys.readouterr().err
    assert len(out.read_text(encoding="utf-8").splitlines()) == len(source.read_text().splitlines())
    # the same data dir prepared again, with a shared vocabulary: its ids are other pieces
    import shutil

    kept = tmp_path / "data-kept"
    shutil.copytree(data, kept)
    assert main(["prepare-data", "--data-dir", str(data), *common, "--force",
                 "--vocab-size", "305"]) == 0
    capsys.readouterr()
    err = error_line(main(["export", "--format", "ctranslate2", "--run-dir", str(run),
                           "--export-dir", str(tmp_path / "ct2-stale"), "--vmap"]), capsys)
    assert "would map other pieces" in err
    shutil.rmtree(data)
    kept.rename(data)


def _ctranslate2_greedy_matches(run, export_dir, texts):
    pytest.importorskip("ctranslate2")
    from tests.export.test_ctranslate2 import ct2_greedy, tf_nmt_greedy
    from tf_nmt.inference.formats import CTranslate2ExportError
    from tf_nmt.inference.ctranslate2 import CTranslate2Translator
    from tf_nmt.export.ctranslate2 import export_ctranslate2
    from tf_nmt.run_dir import load_trained_model

    model, tokenizer, cfg = load_trained_model(run)
    assert isinstance(tokenizer, TokenizerPair) and not tokenizer.shared
    export_ctranslate2(model, tokenizer, cfg, export_dir, run_dir=run)
    metadata = json.loads((export_dir / "tf_nmt_export.json").read_text())
    assert metadata["shared_vocabulary"] is False
    assert metadata["source_vocab_fingerprint"] == tokenizer.source.fingerprint
    assert metadata["vocab_fingerprint"] == tokenizer.target.fingerprint
    assert (export_dir / "source_vocab.model").read_bytes() == tokenizer.source.model_proto
    assert not (export_dir / "shared_vocabulary.json").exists()
    assert tf_nmt_greedy(model, tokenizer, texts) == ct2_greedy(export_dir, texts)
    (export_dir / "source_vocab.model").write_bytes(tokenizer.target.model_proto)
    with pytest.raises(CTranslate2ExportError, match="source_vocab.model: vocabulary"):
        CTranslate2Translator(export_dir)


def _other_vocab_mode_is_refused(run, data, tmp_path, common, vocab, settings, capsys):
    """A shared-vocabulary data dir whose (one) model is the run's target model: the same
    languages and target vocabulary, another mode."""
    shared = tmp_path / "shared"
    assert main(["prepare-data", "--data-dir", str(shared), *common,
                 "--spm-model", str(data / vocab["tgt"]["path"])]) == 0
    capsys.readouterr()
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    err = error_line(main(["train", "--data-dir", str(shared), "--run-dir", str(run),
                           *settings, "--set", "train.train_steps=90"]), capsys)
    assert "cannot resume" in err and "separate source vocabulary" in err
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before
    err = error_line(main(["evaluate", "--run-dir", str(run), "--data-dir", str(shared),
                           "--split", "test"]), capsys)
    assert "one shared vocabulary" in err and "separate vocabularies" in err
    # a run directory whose source model was swapped is refused by export (and everything
    # else that loads the run)
    (run / "source_vocab.model").write_bytes((run / "vocab.model").read_bytes())
    err = error_line(main(["export", "--run-dir", str(run), "--export-dir",
                           str(tmp_path / "never")]), capsys)
    assert "source_vocab.model" in err and not (tmp_path / "never").exists()
