"""Translation of raw strings, in-graph: tokenize → beam search → detokenize.

The same graph function is used for evaluation and inside the exported SavedModel, so the BLEU
reported by ``tf-nmt evaluate`` is the BLEU of what is served.
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np

from tf_nmt.compat import keras, tf
from tf_nmt.data.tokenizer import EOS_ID, PAD_ID, SubwordTokenizer
from tf_nmt.models.decoding import beam_search


def source_ids(tokenizer: SubwordTokenizer, texts: tf.Tensor, max_source_length: int) -> tf.Tensor:
    """Strings [B] -> padded source ids [B, S] ending in eos, truncated to ``max_source_length``."""
    ids = tokenizer.tokenize(texts)[:, : max_source_length - 1]
    eos = tf.RaggedTensor.from_tensor(tf.fill([ids.nrows(), 1], tf.constant(EOS_ID, tf.int32)))
    return tf.concat([ids, eos], axis=1).to_tensor(default_value=PAD_ID)


def make_translate_fn(model: keras.Model, tokenizer: SubwordTokenizer, beam_size: int = 4,
                      length_penalty: float = 0.6, max_source_length: int = 256):
    """A ``tf.function`` mapping a batch of raw English strings to German strings."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def translate(texts: tf.Tensor) -> tf.Tensor:
        source = source_ids(tokenizer, texts, max_source_length)
        hypotheses, _ = beam_search(model, source, beam_size=beam_size, length_penalty=length_penalty)
        return tokenizer.detokenize(hypotheses[:, 0, :])

    return translate


def translate_texts(translate_fn, tokenizer: SubwordTokenizer, texts: Sequence[str],
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
