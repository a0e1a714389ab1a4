"""Greedy and beam search: exactness on a known distribution, beam 1 == greedy, output format,
unknown batch size in tf.function, SavedModel round trip."""
import itertools
import math

import numpy as np
import pytest

from tests.models.helpers import make
from tf_nmt.compat import tf
from tf_nmt.models.base import BOS_ID, EOS_ID, PAD_ID, Seq2SeqModel
from tf_nmt.models.decoding import beam_search, default_max_length, greedy_search

SOURCE = tf.constant([[5, 6, 7, 8, 3, 0], [9, 10, 3, 0, 0, 0], [11, 3, 0, 0, 0, 0]], tf.int32)
SIGNATURE = [tf.TensorSpec([None, None], tf.int32)]


class MarkovModel(Seq2SeqModel):
    """Next-token logits depend on the previous token only (a fixed table): exact search is easy."""

    def __init__(self, table: np.ndarray) -> None:
        super().__init__(table.shape[0], "markov", {})
        self.table = tf.constant(table, tf.float32)

    def encode(self, source, training=False):
        return {"source_mask": tf.cast(tf.not_equal(source, PAD_ID), tf.float32)}

    def initial_decoder_state(self, encoded):
        return {"counter": tf.zeros([tf.shape(encoded["source_mask"])[0], 1])}

    def decode_step(self, ids, step, state):
        return tf.gather(self.table, ids[:, -1]), {"counter": state["counter"] + 1.0}


def markov_table(seed=3, vocab=6):
    table = np.random.RandomState(seed).normal(0, 2, (vocab, vocab)).astype(np.float32)
    table[:, [PAD_ID, BOS_ID]] = -50.0  # never generated anyway
    return table


def brute_force(table, max_length, alpha):
    """All eos-terminated sequences of <= max_length tokens, best first, with their scores."""
    logp = table - np.log(np.exp(table).sum(1, keepdims=True))
    real = [t for t in range(table.shape[0]) if t not in (PAD_ID, BOS_ID, EOS_ID)]
    results = []
    for n in range(max_length):
        for body in itertools.product(real, repeat=n):
            seq = list(body) + [EOS_ID]
            prev, total = BOS_ID, 0.0
            for tok in seq:
                total, prev = total + logp[prev, tok], tok
            results.append((total / ((5 + len(seq)) / 6) ** alpha, seq))
    return sorted(results, key=lambda r: -r[0])


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_wide_beam_is_exact_search(alpha):
    table, max_length, k = markov_table(), 4, 128  # k > every candidate count: exhaustive
    model = MarkovModel(table)
    ids, scores = beam_search(model, SOURCE[:1], beam_size=k, length_penalty=alpha, max_length=max_length)
    expected = brute_force(table, max_length, alpha)
    n = len(expected)  # every eos-terminated sequence fits in the beam
    got = [list(row[: list(row).index(EOS_ID) + 1]) for row in ids.numpy()[0, :n]]
    assert got == [seq for _, seq in expected]
    np.testing.assert_allclose(scores.numpy()[0, :n], [s for s, _ in expected], rtol=1e-5)


def test_beam_search_finds_better_than_greedy():
    table = np.full((6, 6), -50.0, np.float32)
    # From bos: token 4 is likeliest, but 4's continuations are flat, while 5 leads to eos surely.
    table[BOS_ID, [4, 5]] = [1.0, 0.8]
    table[4, [3, 4, 5]] = 0.0
    table[5, EOS_ID] = 10.0
    model = MarkovModel(table)
    greedy, _ = greedy_search(model, SOURCE[:1], max_length=3)
    beam, _ = beam_search(model, SOURCE[:1], beam_size=2, length_penalty=0.0, max_length=3)
    assert greedy.numpy()[0, 0] == 4
    assert list(beam.numpy()[0, 0, :2]) == [5, EOS_ID]


@pytest.mark.parametrize("name", ["transformer_pre", "gnmt_luong"])
def test_beam_of_one_is_greedy(name):
    model = make(name)
    greedy_ids, lengths = greedy_search(model, SOURCE, max_length=8)  # eager: keep it short
    beam_ids, _ = beam_search(model, SOURCE, beam_size=1, max_length=8)
    np.testing.assert_array_equal(beam_ids.numpy()[:, 0, :], greedy_ids.numpy())
    np.testing.assert_array_equal(lengths.numpy(), (greedy_ids.numpy() != PAD_ID).sum(1))


def check_best_first(ids, scores):
    """Finished (eos-terminated) hypotheses come first, best first; a sentence with fewer than
    k of them is completed with its best unfinished ones, again best first (these may score
    above a finished one: a complete translation is still preferred, as in GNMT/T2T)."""
    for row_ids, row_scores in zip(ids, scores):
        finished = np.array([EOS_ID in row for row in row_ids])
        n = int(finished.sum())
        assert finished[:n].all() and not finished[n:].any()
        for part in (row_scores[:n], row_scores[n:]):
            assert (np.diff(part) <= 1e-6).all()


def check_format(ids, eos_allowed_missing=True):
    for row in ids.reshape(-1, ids.shape[-1]):
        assert BOS_ID not in row
        if EOS_ID in row:
            end = list(row).index(EOS_ID)
            assert (row[end + 1:] == PAD_ID).all()
            assert (row[:end] != PAD_ID).all()
        else:
            assert eos_allowed_missing


@pytest.mark.parametrize("name", ["transformer_post", "gnmt_bahdanau"])
def test_beam_search_in_tf_function_with_unknown_batch(name):
    model = make(name)
    search = tf.function(lambda s: beam_search(model, s, beam_size=3), input_signature=SIGNATURE)
    ids, scores = search(SOURCE)
    assert ids.shape[:2] == (3, 3) and scores.shape == (3, 3)
    assert ids.shape[2] <= int(default_max_length(SOURCE))
    check_best_first(ids.numpy(), scores.numpy())
    check_format(ids.numpy())
    single, _ = search(SOURCE[1:2])  # a different batch size reuses the graph
    assert single.shape[:2] == (1, 3)


def test_greedy_in_tf_function_and_max_length():
    model = make("transformer_pre")
    search = tf.function(lambda s: greedy_search(model, s, max_length=4), input_signature=SIGNATURE)
    ids, lengths = search(SOURCE)
    assert ids.shape == (3, 4) or (ids.shape[1] < 4 and (lengths.numpy() <= ids.shape[1]).all())
    check_format(ids.numpy())
    assert int(default_max_length(SOURCE)) == 2 * 5 + 10
    assert int(default_max_length(tf.ones([1, 400], tf.int32))) == 256


def test_finished_hypotheses_stop_the_search():
    table = np.full((6, 6), -20.0, np.float32)
    table[BOS_ID, [4, 5]] = 5.0
    table[[4, 5], EOS_ID] = 5.0
    ids, scores = beam_search(MarkovModel(table), SOURCE, beam_size=2, length_penalty=0.6)
    assert ids.shape[2] == 2  # both beams finished after two tokens, far before max_length
    assert sorted(map(tuple, ids.numpy()[0])) == [(4, EOS_ID), (5, EOS_ID)]
    np.testing.assert_allclose(scores.numpy()[0], [-math.log(2) / (7 / 6) ** 0.6] * 2, atol=1e-4)


class BeamSearcher(tf.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    @tf.function(input_signature=SIGNATURE)
    def search(self, source):
        return beam_search(self.model, source, beam_size=2, length_penalty=0.6)


def save_and_reload(module, path):
    """tf.saved_model.save/load; Keras' own per-layer traces are skipped (plain save works too,
    see tests/export, but is several times slower: it traces every Keras layer)."""
    from tf_keras.src.saving.legacy.saved_model.utils import keras_option_scope

    with keras_option_scope(save_traces=False, in_tf_saved_model_scope=True):
        tf.saved_model.save(module, path)
    return tf.saved_model.load(path)


@pytest.mark.parametrize("name", ["transformer_pre", "gnmt_luong"])
def test_saved_model_round_trip(name, tmp_path):
    model = make(name)
    module = BeamSearcher(model)
    expected_ids, expected_scores = module.search(SOURCE)
    loaded = save_and_reload(module, str(tmp_path / "m"))
    ids, scores = loaded.search(SOURCE)
    np.testing.assert_array_equal(ids.numpy(), expected_ids.numpy())
    np.testing.assert_allclose(scores.numpy(), expected_scores.numpy(), rtol=1e-6)
    other, _ = loaded.search(SOURCE[:1])  # unknown batch size survives export
    np.testing.assert_array_equal(other.numpy(), module.search(SOURCE[:1])[0].numpy())
