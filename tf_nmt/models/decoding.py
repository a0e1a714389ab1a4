"""Model-agnostic greedy and beam search over the ``Seq2SeqModel`` decoding interface.

Both run a ``tf.while_loop`` (so they trace into one graph with unknown batch size and length)
and return ids without the leading bos, with everything after eos set to pad. pad and bos are
never generated. ``max_length`` bounds the number of generated tokens (eos included); by default
it is ``2 * longest non-pad source length + 10``, capped at :data:`MAX_DECODE_LENGTH`.

Beam search keeps ``beam_size`` alive and ``beam_size`` finished hypotheses per sentence. Each
step takes the ``2 * beam_size`` best extensions; an extension ending in eos that is among the
best ``beam_size`` is finished (scored with the GNMT length penalty ``((5 + len) / 6) ** alpha``,
``len`` counting eos), the best ``beam_size`` others stay alive. A sentence is done once it has
``beam_size`` finished hypotheses, so ``beam_size=1`` is exactly greedy search. Sentences still
unfinished at ``max_length`` are completed with their best alive hypotheses.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple, Union

from tf_nmt.compat import tf
from tf_nmt.models.base import BOS_ID, EOS_ID, PAD_ID

MAX_DECODE_LENGTH = 256
NEG = -1e9  # score of impossible hypotheses (finite, so no inf - inf NaNs)

LengthLike = Union[None, int, tf.Tensor]


def default_max_length(source: tf.Tensor, cap: int = MAX_DECODE_LENGTH) -> tf.Tensor:
    """``min(2 * longest non-pad source length + 10, cap)`` for the batch, int32 scalar."""
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(source, PAD_ID), tf.int32), axis=1)
    return tf.minimum(2 * tf.reduce_max(lengths) + 10, cap)


def _limit(source: tf.Tensor, max_length: LengthLike) -> tf.Tensor:
    if max_length is None:
        return default_max_length(source)
    return tf.cast(max_length, tf.int32)


def _loose_shape(t: tf.Tensor) -> tf.TensorShape:
    """Loop invariant: any size along every axis but the last (feature) one."""
    rank = t.shape.rank
    if rank == 0:
        return tf.TensorShape([])
    if rank == 1:
        return tf.TensorShape([None])
    return tf.TensorShape([None] * (rank - 1) + [t.shape[-1]])


def _log_probs(model, ids: tf.Tensor, step: tf.Tensor, state: Dict[str, tf.Tensor]):
    """Next-token log-probabilities with pad and bos ruled out, and the new state."""
    logits, state = model.decode_step(ids, step, state)
    vocab = tf.shape(logits)[-1]
    banned = tf.reduce_sum(tf.one_hot([PAD_ID, BOS_ID], vocab, on_value=NEG), axis=0)
    return tf.nn.log_softmax(tf.cast(logits, tf.float32) + banned), state


def greedy_search(model, source: tf.Tensor, max_length: LengthLike = None) -> Tuple[tf.Tensor, tf.Tensor]:
    """Arg-max decoding: (ids int32 [B, L], lengths int32 [B] counting eos)."""
    source = tf.convert_to_tensor(source, tf.int32)
    batch = tf.shape(source)[0]
    limit = _limit(source, max_length)
    state = model.initial_decoder_state(model.encode(source, training=False))
    ids = tf.fill([batch, 1], tf.constant(BOS_ID, tf.int32))
    finished = tf.zeros([batch], tf.bool)

    def cond(t, ids, finished, state):
        return tf.logical_and(t < limit, tf.logical_not(tf.reduce_all(finished)))

    def body(t, ids, finished, state):
        log_probs, state = _log_probs(model, ids, t, state)
        token = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
        token = tf.where(finished, PAD_ID, token)
        return t + 1, tf.concat([ids, token[:, None]], 1), finished | tf.equal(token, EOS_ID), state

    _, ids, _, _ = tf.while_loop(
        cond, body, (tf.constant(0), ids, finished, state),
        shape_invariants=(tf.TensorShape([]), tf.TensorShape([None, None]), tf.TensorShape([None]),
                          tf.nest.map_structure(_loose_shape, state)))
    ids = ids[:, 1:]
    return ids, tf.reduce_sum(tf.cast(tf.not_equal(ids, PAD_ID), tf.int32), axis=1)


def length_penalty_factor(length: tf.Tensor, alpha: float) -> tf.Tensor:
    """GNMT length normalisation ``((5 + length) / 6) ** alpha``."""
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


def beam_search(model, source: tf.Tensor, beam_size: int = 4, length_penalty: float = 0.6,
                max_length: LengthLike = None) -> Tuple[tf.Tensor, tf.Tensor]:
    """Best-first hypotheses (ids int32 [B, K, L], length-normalised log-prob scores float32 [B, K])."""
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    k = int(beam_size)
    source = tf.convert_to_tensor(source, tf.int32)
    batch = tf.shape(source)[0]
    limit = _limit(source, max_length)
    state = model.initial_decoder_state(model.encode(source, training=False))
    state = {name: tf.repeat(value, k, axis=0) for name, value in state.items()}  # [B*K, ...]
    fixed = set(model.beam_invariant_keys)
    batch_offsets = tf.range(batch)[:, None] * k

    alive_ids = tf.fill([batch, k, 1], tf.constant(BOS_ID, tf.int32))
    alive_logp = tf.tile(tf.constant([[0.0] + [NEG] * (k - 1)]), [batch, 1])  # expand beam 0 first
    fin_ids = tf.zeros([batch, k, 1], tf.int32)
    fin_scores = tf.fill([batch, k], NEG)

    def is_done(fin_scores):
        return tf.reduce_all(fin_scores > NEG / 2, axis=1)

    def cond(t, alive_ids, alive_logp, fin_ids, fin_scores, state):
        return tf.logical_and(t < limit, tf.logical_not(tf.reduce_all(is_done(fin_scores))))

    def body(t, alive_ids, alive_logp, fin_ids, fin_scores, state):
        flat_ids = tf.reshape(alive_ids, [batch * k, t + 1])
        log_probs, new_state = _log_probs(model, flat_ids, t, state)
        vocab = tf.shape(log_probs)[-1]
        totals = alive_logp[:, :, None] + tf.reshape(log_probs, [batch, k, vocab])
        top_logp, top_index = tf.math.top_k(tf.reshape(totals, [batch, k * vocab]), 2 * k)
        origin, token = top_index // vocab, top_index % vocab
        cand_ids = tf.concat([tf.gather(alive_ids, origin, batch_dims=1), token[:, :, None]], 2)
        is_eos = tf.equal(token, EOS_ID)

        # Finished: eos extensions among the best k, for sentences not yet done.
        finish = is_eos[:, :k] & (top_logp[:, :k] > NEG / 2) & ~is_done(fin_scores)[:, None]
        new_scores = tf.where(finish, top_logp[:, :k] / length_penalty_factor(t + 1, length_penalty), NEG)
        pool_ids = tf.concat([tf.pad(fin_ids, [[0, 0], [0, 0], [0, 1]]), cand_ids[:, :k]], 1)
        fin_scores, best = tf.math.top_k(tf.concat([fin_scores, new_scores], 1), k)
        fin_ids = tf.gather(pool_ids, best, batch_dims=1)

        # Alive: the best k extensions that do not end in eos (there are always at least k).
        alive_logp, keep = tf.math.top_k(tf.where(is_eos, float("-inf"), top_logp), k)
        alive_ids = tf.gather(cand_ids, keep, batch_dims=1)
        parents = tf.reshape(tf.gather(origin, keep, batch_dims=1) + batch_offsets, [-1])
        state = {name: value if name in fixed else tf.gather(value, parents)
                 for name, value in new_state.items()}
        return t + 1, alive_ids, alive_logp, fin_ids, fin_scores, state

    ids_shape = tf.TensorShape([None, k, None])
    t, alive_ids, alive_logp, fin_ids, fin_scores, _ = tf.while_loop(
        cond, body, (tf.constant(0), alive_ids, alive_logp, fin_ids, fin_scores, state),
        shape_invariants=(tf.TensorShape([]), ids_shape, tf.TensorShape([None, k]), ids_shape,
                          tf.TensorShape([None, k]), tf.nest.map_structure(_loose_shape, state)))

    # Fill the slots of sentences with fewer than k finished hypotheses with the best alive ones.
    n_finished = tf.reduce_sum(tf.cast(fin_scores > NEG / 2, tf.int32), axis=1)[:, None]
    slot = tf.range(k)[None, :]
    use_finished = slot < n_finished
    alive_slot = tf.maximum(slot - n_finished, 0)
    alive_scores = alive_logp / length_penalty_factor(t, length_penalty)
    ids = tf.where(use_finished[:, :, None], fin_ids, tf.gather(alive_ids, alive_slot, batch_dims=1))
    scores = tf.where(use_finished, fin_scores, tf.gather(alive_scores, alive_slot, batch_dims=1))
    return ids[:, :, 1:], scores
