"""The interface every NMT model implements, so decoding and export never depend on the model kind.

A model maps ``{"source": int32[B,S], "target_in": int32[B,T]}`` to float32 logits ``[B,T,V]``
for teacher-forced training (bfloat16 in a mixed-precision model the trainer builds for its fused
loss kernel, see :class:`tf_nmt.models.embedding.SharedEmbedding`), and exposes an incremental
decoder for search:

* ``encode(source)`` -> dict of batch-major tensors,
* ``initial_decoder_state(encoded)`` -> dict of batch-major tensors,
* ``decode_step(ids, step, state)`` -> (logits [B,V] for the token after ``ids[:, step]``, state).

``ids`` holds every token so far, starting with bos, and ``step`` is the index of its last token
(``ids.shape[1] - 1``). Search reorders and tiles every state tensor along axis 0, except the keys in
``beam_invariant_keys`` (tensors that are the same for all hypotheses of one sentence and never
change, such as encoder outputs): those are tiled once and never gathered again.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from tf_nmt.compat import KERAS3, keras, tf
from tf_nmt.models.activation_quant import ActivationQuantization, aq_config

# Fixed project-wide (they match tf_nmt.data.tokenizer; repeated here so that the models do not
# depend on the tokenizer and its tensorflow-text import).
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3

State = Dict[str, tf.Tensor]


class Seq2SeqModel(keras.Model):
    """Base class: hyper-parameter bookkeeping and the abstract decoding interface.

    ``activation_quantization`` (``train.quantize_activations_*``, not a hyper-parameter: the
    weights are the same) log-quantises every matmul input; see
    :mod:`tf_nmt.models.activation_quant`.
    """

    beam_invariant_keys: Tuple[str, ...] = ()

    def __init__(self, vocab_size: int, name: str, hparams: Dict[str, Any],
                 activation_quantization: Optional[ActivationQuantization] = None,
                 source_vocab_size: Optional[int] = None) -> None:
        super().__init__(name=name)
        self.activation_quantization = ActivationQuantization.coerce(activation_quantization)
        for what, size in (("vocab_size", vocab_size), ("source_vocab_size", source_vocab_size)):
            if size is not None and size < 4:
                raise ValueError(f"{what} must be >= 4 (pad, unk, bos, eos), got {size}")
        self.vocab_size = int(vocab_size)
        # None: the source shares the target's embedding; set: a source table of its own
        self.source_vocab_size = None if source_vocab_size is None else int(source_vocab_size)
        self._hparams = dict(hparams)

    def get_config(self) -> Dict[str, Any]:
        return {"vocab_size": self.vocab_size, "source_vocab_size": self.source_vocab_size,
                **self._hparams, "activation_quantization": aq_config(self.activation_quantization)}

    @classmethod
    def from_config(cls, config: Dict[str, Any], custom_objects=None):
        return cls(**config)

    if KERAS3:
        def __setattr__(self, name: str, value: Any) -> None:
            """Keras 3 tracks a list of layers for its own saving only: a ``tf.train.Checkpoint``
            of the model alone would miss the layers in it (evaluation and export would restore
            nothing into them, silently). Track such a list for TensorFlow too, under its
            attribute name (``encoder_layers/0/...`` in the object graph, as Keras 2 does)."""
            super().__setattr__(name, value)
            if (isinstance(value, list) and value and not name.startswith("_")
                    and all(isinstance(v, keras.layers.Layer) for v in value)):
                self._track_trackable(tf.__internal__.tracking.wrap(list(value)), name=name,
                                      overwrite=True)

        @property
        def _default_save_signature(self):
            """None: an export brings its own signatures (Keras 3 would otherwise trace a
            ``serving_default`` with float inputs when the model is saved inside a module)."""
            return None

    def encode(self, source: tf.Tensor, training: bool = False) -> State:
        raise NotImplementedError

    def initial_decoder_state(self, encoded: State) -> State:
        raise NotImplementedError

    def decode_step(self, ids: tf.Tensor, step: tf.Tensor, state: State) -> Tuple[tf.Tensor, State]:
        raise NotImplementedError


def padding_mask(ids: tf.Tensor) -> tf.Tensor:
    """float32 [B,S]: 1.0 for real tokens, 0.0 for pad."""
    return tf.cast(tf.not_equal(ids, PAD_ID), tf.float32)
