"""The shared SentencePiece vocabulary: in-graph tokenisation round-trips and fixed special ids."""
import pytest

from tests.helpers import toy_pairs
from tf_nmt.compat import tf
from tf_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, SubwordTokenizer, train_sentencepiece

TEXTS = [s for pair in toy_pairs() for s in pair] + [
    "Öffnen Sie die Datei „Bericht.odt“ mit %s.", "Größe: 12 × 7 cm — fertig!",
    "Tabs\tand  two spaces stay.", "漢字 and emoji 🙂 fall back to bytes."]


@pytest.fixture(scope="module")
def tokenizer():
    return SubwordTokenizer(train_sentencepiece(TEXTS * 3, vocab_size=400))


def test_special_ids_are_fixed(tokenizer):
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_proto=tokenizer.model_proto)
    assert (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()) == (PAD_ID, UNK_ID, BOS_ID, EOS_ID)


def test_round_trip_exact(tokenizer):
    ids = tokenizer.encode(TEXTS)
    assert all(len(x) > 0 for x in ids)
    assert tokenizer.decode(ids) == TEXTS


def test_unseen_characters_round_trip_through_byte_fallback(tokenizer):
    unseen = ["Ελληνικά και ქართული ✓"]
    assert tokenizer.decode(tokenizer.encode(unseen)) == unseen


def test_detokenize_stops_at_eos_and_ignores_padding(tokenizer):
    ids = tokenizer.encode(TEXTS[:2])
    padded = [ids[0] + [EOS_ID] + ids[1], ids[1] + [EOS_ID, PAD_ID, PAD_ID]]
    width = max(map(len, padded))
    dense = tf.constant([row + [PAD_ID] * (width - len(row)) for row in padded])
    out = [s.decode() for s in tokenizer.detokenize(dense).numpy()]
    assert out == TEXTS[:2]


def test_fingerprint_identifies_the_vocabulary(tokenizer, tmp_path):
    path = tmp_path / "v.model"
    tokenizer.save(path)
    again = SubwordTokenizer.load(path)
    assert again.fingerprint == tokenizer.fingerprint
    other = SubwordTokenizer(train_sentencepiece(TEXTS[:40] * 3, vocab_size=300))
    assert other.fingerprint != tokenizer.fingerprint


def test_empty_corpus_and_missing_model_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="empty corpus"):
        train_sentencepiece(["", "   "], vocab_size=400)
    with pytest.raises(ValueError, match=">= 300"):
        train_sentencepiece(["a b c"], vocab_size=100)
    with pytest.raises(FileNotFoundError, match="prepare-data"):
        SubwordTokenizer.load(tmp_path / "missing.model")
