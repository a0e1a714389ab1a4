"""Translation of raw strings, in-graph: tokenize → beam search → detokenize. ``tokenizer`` is a
shared :class:`~tf_nmt.data.tokenizer.SubwordTokenizer` or separate
:class:`~tf_nmt.data.tokenizer.TokenizerPair` (the source model tokenizes, the target's detokenizes).

The same graph function is used for evaluation and inside the exported SavedModel, so the BLEU
reported by ``tf-nmt evaluate`` is the BLEU of what is served.

With ``chunk_size`` C the function sorts its batch by source length and decodes it C sentences
at a time (a ``tf.while_loop`` over chunks), returning the translations in the input order. A
client batch in arbitrary order then costs about what a length-sorted one does: each chunk is
padded to its own longest source, and its beam search stops when its own sentences are done
instead of when the longest of the whole batch is. Each chunk's default decoding limit is that
of its own sentences (see :func:`tf_nmt.models.decoding.default_max_length`).
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np

from tf_nmt.compat import keras, tf
from tf_nmt.data.tokenizer import EOS_ID, PAD_ID, Tokenizers
from tf_nmt.models.decoding import beam_search


def source_ids(tokenizer: Tokenizers, texts: tf.Tensor, max_source_length: int) -> tf.Tensor:
    """Strings [B] -> padded source ids [B, S] ending in eos, truncated to ``max_source_length``."""
    return padded_source(tokenizer.tokenize(texts), max_source_length)


def padded_source(ids: tf.RaggedTensor, max_source_length: int) -> tf.Tensor:
    """Ragged ids [B, (n)] -> padded [B, S] ending in eos, truncated to ``max_source_length``."""
    ids = ids[:, : max_source_length - 1]
    eos = tf.RaggedTensor.from_tensor(tf.fill([ids.nrows(), 1], tf.constant(EOS_ID, tf.int32)))
    return tf.concat([ids, eos], axis=1).to_tensor(default_value=PAD_ID)


def check_chunk_size(chunk_size: int) -> None:
    """ValueError for a negative ``chunk_size`` (0 decodes the whole batch at once)."""
    if chunk_size < 0:
        raise ValueError(f"chunk_size must be >= 0 (0: the whole batch at once), got {chunk_size}")


def translate_graph(model: keras.Model, tokenizer: Tokenizers, texts: tf.Tensor,
                    beam_size: int = 4, length_penalty: float = 0.6, max_source_length: int = 256,
                    chunk_size: int = 0) -> tf.Tensor:
    """Strings [B] -> translations [B], built into the calling ``tf.function``'s graph
    (``chunk_size`` > 0: length-sorted chunks of that many sentences, see the module docstring)."""
    check_chunk_size(chunk_size)

    def decode(ids: tf.RaggedTensor) -> tf.Tensor:
        source = padded_source(ids, max_source_length)
        hypotheses, _ = beam_search(model, source, beam_size=beam_size, length_penalty=length_penalty)
        return tokenizer.detokenize(hypotheses[:, 0, :])

    ids = tokenizer.tokenize(texts)
    if not chunk_size:
        return decode(ids)
    order = tf.argsort(ids.row_lengths(), stable=True)
    ordered = tf.gather(ids, order)
    total = tf.size(texts)
    chunks = (total + chunk_size - 1) // chunk_size

    def body(i, out):
        rows = ordered[i * chunk_size: tf.minimum((i + 1) * chunk_size, total)]
        return i + 1, out.write(i, decode(rows))

    _, out = tf.while_loop(lambda i, _: i < chunks, body,
                           (tf.constant(0), tf.TensorArray(tf.string, size=chunks,
                                                           infer_shape=False)))
    translated = _concat(out, chunks)
    return tf.gather(translated, tf.math.invert_permutation(order))


def _concat(out: tf.TensorArray, chunks: tf.Tensor) -> tf.Tensor:
    """The chunks' translations in sorted order ([0] strings for an empty batch)."""
    return tf.cond(chunks > 0, out.concat, lambda: tf.zeros([0], tf.string))


def make_translate_fn(model: keras.Model, tokenizer: Tokenizers, beam_size: int = 4,
                      length_penalty: float = 0.6, max_source_length: int = 256,
                      chunk_size: int = 0):
    """A ``tf.function`` mapping a batch of raw English strings to German strings
    (:func:`translate_graph`)."""
    check_chunk_size(chunk_size)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def translate(texts: tf.Tensor) -> tf.Tensor:
        return translate_graph(model, tokenizer, texts, beam_size, length_penalty,
                               max_source_length, chunk_size)

    return translate


def translate_texts(translate_fn, tokenizer: Tokenizers, texts: Sequence[str],
                    batch_size: int = 64) -> List[str]:
    """Translate a list of strings in length-sorted batches (less padding) and restore order."""
    if not texts:
        return []
    lengths = [len(ids) for ids in tokenizer.encode(list(texts))]
    order = np.argsort(lengths, kind="stable")
    outputs: List[str] = [""] * len(texts)
    for start in range(0, len(order), batch_size):
        index = order[start:start + batch_size]
        batch = tf.constant([texts[i] for i in index])
        for i, hyp in zip(index, translate_fn(batch).numpy()):
            outputs[i] = hyp.decode("utf-8")
    return outputs
