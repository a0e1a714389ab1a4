"""Batched translation: length-sorted batches, original order restored, sources end in eos."""
import numpy as np
import pytest

from tests.helpers import toy_pairs
from tf_nmt.compat import tf
from tf_nmt.data.tokenizer import EOS_ID, PAD_ID, SubwordTokenizer, train_sentencepiece
from tf_nmt.inference.serving_graph import source_ids, translate_texts


@pytest.fixture(scope="module")
def tokenizer():
    return SubwordTokenizer(train_sentencepiece([t for p in toy_pairs() for t in p] * 10, 300))


def test_order_is_restored_and_batches_are_length_sorted(tokenizer):
    texts = ["The file is new and the dog is old.", "A", "The window is empty.", "", "The menu."]
    seen = []

    def fake_translate(batch):
        strings = [t.decode() for t in batch.numpy()]
        seen.append([len(tokenizer.encode([s])[0]) for s in strings])
        return tf.constant([s.upper() for s in strings])

    out = translate_texts(fake_translate, tokenizer, texts, batch_size=2)
    assert out == [t.upper() for t in texts]
    assert [len(b) for b in seen] == [2, 2, 1]
    flat = [n for b in seen for n in b]
    assert flat == sorted(flat)


def test_no_texts_no_calls(tokenizer):
    assert translate_texts(lambda _b: pytest.fail("called"), tokenizer, []) == []


def test_source_ids_end_in_eos_and_are_truncated(tokenizer):
    texts = tf.constant(["The file is new.", "The window is empty and the book is old."])
    ids = source_ids(tokenizer, texts, max_source_length=6).numpy()
    assert ids.shape == (2, 6)
    full = tokenizer.encode(["The file is new."])[0]
    row = list(ids[0])
    n = min(len(full), 5)
    assert row[:n] == full[:n] and row[n] == EOS_ID and all(v == PAD_ID for v in row[n + 1:])
    assert ids[1, -1] == EOS_ID and np.all(ids[1] != PAD_ID)
