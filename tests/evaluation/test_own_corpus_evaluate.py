"""An en->fr run trained on an own corpus: evaluate scores it with the target language's BLEU
tokenizer and refuses another data dir; both exports record its languages and translate."""
import json

import pytest

pytestmark = pytest.mark.slow  # trains a tiny model first

from tests.data.own_corpus_fixture import write_own_corpus
from tests.helpers import write_toy_data_dir
from tests.training.test_own_corpus import config
from tf_nmt.cli import main
from tf_nmt.data.prepared import DataError
from tf_nmt.evaluation.bleu import corpus_bleu, tokenizer_for
from tf_nmt.evaluation.evaluate import evaluate_run
from tf_nmt.training.trainer import train


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("own-eval")
    data_dir = write_own_corpus(root / "data", num_shards=2, repeats=2)
    train(config(data_dir, "train.train_steps=6"), root / "run", log=lambda _m: None)
    return root / "run", data_dir


def test_evaluate_scores_the_target_language_and_records_it(trained):
    run, data_dir = trained
    lines = []
    report = evaluate_run(run, split="test", beam_size=1, limit=6, log=lines.append)
    hyps = (run / "test.hyp.fr").read_text(encoding="utf-8").splitlines()
    refs = (data_dir / "corpus" / "test.fr").read_text(encoding="utf-8").splitlines()[:6]
    assert report["sentences"] == len(hyps) == 6
    assert report["languages"] == ["en", "fr"]
    assert report["bleu_tokenize"] == "13a" and report["bleu_tokenize_fallback"] is None
    assert report["bleu"] == pytest.approx(corpus_bleu(hyps, refs).score)
    assert "tok:13a" in report["signature"]


def test_bleu_tokenizer_follows_the_target_language():
    assert tokenizer_for("fr") == ("13a", None) and tokenizer_for("de") == ("13a", None)
    assert tokenizer_for("zh") == ("zh", None)
    for lang, wanted in (("ja", "ja-mecab"), ("ko", "ko-mecab")):
        name, fallback = tokenizer_for(lang)
        assert name in (wanted, "char")
        assert (fallback is None) == (name == wanted)
        if fallback:
            assert "char" in fallback and "\n" not in fallback
    assert "tok:zh" in corpus_bleu(["我爱你"], ["我爱你"], "zh").signature


def test_evaluate_refuses_a_data_dir_of_other_languages_or_vocabulary(trained, tmp_path):
    run, data_dir = trained
    with pytest.raises(DataError, match="holds en-de but the run .* was trained on en-fr"):
        evaluate_run(run, split="dev", data_dir=write_toy_data_dir(tmp_path / "en-de"),
                     log=lambda _m: None)
    other_vocab = write_own_corpus(tmp_path / "other", num_shards=1, repeats=1, vocab_size=330)
    with pytest.raises(DataError, match="vocabulary") as err:
        evaluate_run(run, split="dev", data_dir=other_vocab, log=lambda _m: None)
    assert "\n" not in str(err.value)
    no_test = write_own_corpus(tmp_path / "no-test", num_shards=1, repeats=1, with_test=False,
                               spm_proto=(data_dir / "vocab" / "spm-320.model").read_bytes())
    with pytest.raises(DataError, match="has no test split") as err:
        evaluate_run(run, split="test", data_dir=no_test, log=lambda _m: None)
    assert "\n" not in str(err.value)


def test_exports_record_the_languages_and_translate(trained, tmp_path, capsys):
    run, _ = trained
    texts = ["The dog is old.", "Where is the menu?", "I see the book."]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(texts) + "\n", encoding="utf-8")
    direct, served = tmp_path / "direct.txt", tmp_path / "served.txt"
    assert main(["translate", "--run-dir", str(run), "--input", str(src), "--output",
                 str(direct)]) == 0
    saved = tmp_path / "saved"
    assert main(["export", "--run-dir", str(run), "--export-dir", str(saved)]) == 0
    assert json.loads((saved / "tf_nmt_weights.json").read_text())["languages"] == ["en", "fr"]
    from tf_nmt.compat import tf
    loaded = tf.saved_model.load(str(saved))
    pair = loaded.languages()
    assert (pair["source"].numpy(), pair["target"].numpy()) == (b"en", b"fr")
    assert main(["translate", "--export-dir", str(saved), "--input", str(src), "--output",
                 str(served)]) == 0
    assert served.read_text(encoding="utf-8") == direct.read_text(encoding="utf-8")
    assert len(served.read_text(encoding="utf-8").splitlines()) == len(texts)

    pytest.importorskip("ctranslate2")
    ct2, ct2_out = tmp_path / "ct2", tmp_path / "ct2.txt"
    assert main(["export", "--format", "ctranslate2", "--run-dir", str(run),
                 "--export-dir", str(ct2)]) == 0
    meta = json.loads((ct2 / "tf_nmt_export.json").read_text())
    assert (meta["source_language"], meta["target_language"]) == ("en", "fr")
    assert main(["translate", "--export-dir", str(ct2), "--input", str(src), "--output",
                 str(ct2_out), "--beam-size", "1"]) == 0
    assert len(ct2_out.read_text(encoding="utf-8").splitlines()) == len(texts)


def test_quantized_exports_record_the_languages(trained, tmp_path):
    """Both quantised paths: a run quantised on the fly, and a packed file made from it."""
    from tf_nmt.compat import tf

    run, _ = trained
    direct, packed_export = tmp_path / "q4", tmp_path / "q4-packed"
    assert main(["export", "--run-dir", str(run), "--export-dir", str(direct), "--bits", "4"]) == 0
    packed = tmp_path / "model.q4"
    assert main(["quantize", "--run-dir", str(run), "--bits", "4", "--output", str(packed)]) == 0
    assert main(["export", "--quantized", str(packed), "--export-dir", str(packed_export)]) == 0
    for export in (direct, packed_export):
        pair = tf.saved_model.load(str(export)).languages()
        assert (pair["source"].numpy(), pair["target"].numpy()) == (b"en", b"fr")
