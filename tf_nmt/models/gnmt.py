"""GNMT-style LSTM encoder-decoder (Wu et al. 2016) with a shared, tied embedding.

Encoder: a bidirectional bottom layer (the backward direction reads each sentence reversed
within its own length, so padding never leaks in), then unidirectional layers, residual from
layer 3 on.

Decoder ("attention from the bottom layer" variant): layer 1 reads the target embeddings only;
attention over the encoder outputs is computed from layer 1's outputs, and the context is fed, with
the layer below's output, into every upper layer (residual from layer 3 on). The top output and
the context go through ``tanh(W [h; c])`` (Luong's attentional layer) to the embedding size and
then the tied output projection. Because nothing is fed back from the attention to layer 1, the
teacher-forced ``call`` runs each layer as one ``keras.layers.LSTM`` over the whole sequence (no
Python step loop); ``decode_step`` runs the same cells (same weights, same gate formula) one step.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

from tf_nmt.compat import keras, tf
from tf_nmt.models.activation_quant import ActivationQuantization, QuantDense, lstm_layer
from tf_nmt.models.dropout import make_dropout
from tf_nmt.models.base import Seq2SeqModel, State, padding_mask
from tf_nmt.models.embedding import SharedEmbedding
from tf_nmt.models.rnn_attention import make_attention

GNMT_DEFAULTS: Dict[str, object] = {
    "num_layers": 4, "num_encoder_layers": None, "num_decoder_layers": None, "units": 256,
    "embedding_dim": None, "attention": "luong", "dropout": 0.1, "output_bias": True,
}

RESIDUAL_FROM = 3  # 1-based index of the first layer with a residual connection


class GNMT(Seq2SeqModel):
    """GNMT-style model; layer counts default to ``num_layers``, ``embedding_dim`` to ``units``."""

    def __init__(self, vocab_size: int, num_layers: int = 4, num_encoder_layers: Optional[int] = None,
                 num_decoder_layers: Optional[int] = None, units: int = 256,
                 embedding_dim: Optional[int] = None, attention: str = "luong",
                 dropout: float = 0.1, output_bias: bool = True, name: str = "gnmt",
                 activation_quantization: Optional[ActivationQuantization] = None,
                 source_vocab_size: Optional[int] = None) -> None:
        hparams = dict(num_layers=num_layers, num_encoder_layers=num_encoder_layers,
                       num_decoder_layers=num_decoder_layers, units=units, embedding_dim=embedding_dim,
                       attention=attention, dropout=dropout, output_bias=output_bias)
        super().__init__(vocab_size, name, hparams, activation_quantization, source_vocab_size)
        aq = self.activation_quantization
        n_enc = num_encoder_layers or num_layers
        n_dec = num_decoder_layers or num_layers
        self.units = units
        self.embedding_dim = embedding_dim or units
        self.embedding = SharedEmbedding(vocab_size, self.embedding_dim, output_bias=output_bias,
                                         activation_quantization=aq, name="shared_embedding")
        self.embedding.build(None)
        # separate vocabularies: the encoder looks up a table of its own
        self.source_embedding = None
        if source_vocab_size is not None:
            self.source_embedding = SharedEmbedding(source_vocab_size, self.embedding_dim,
                                                    output_bias=False, name="source_embedding")
            self.source_embedding.build(None)

        def lstm(name: str) -> keras.layers.Layer:
            return lstm_layer(units, aq, name)

        self.encoder_forward = lstm("encoder_0_forward")
        self.encoder_backward = lstm("encoder_0_backward")
        self.encoder_layers = [lstm(f"encoder_{i}") for i in range(1, n_enc)]
        self.decoder_layers = [lstm(f"decoder_{i}") for i in range(n_dec)]
        self.attention = make_attention(attention, units, aq)
        self.attention_output = QuantDense(self.embedding_dim, aq, activation="tanh",
                                           use_bias=False, name="attention_output")
        self.dropout = make_dropout(dropout)

    def _drop(self, x: tf.Tensor, training) -> tf.Tensor:
        return self.dropout(x, training=training) if self.dropout is not None else x

    def encode(self, source: tf.Tensor, training: bool = False) -> State:
        """``{"memory": [B,S,m], "source_mask": [B,S]}``; m = units, or 2*units with one layer."""
        mask = padding_mask(source)
        lengths = tf.cast(tf.reduce_sum(mask, axis=1), tf.int32)
        table = self.source_embedding if self.source_embedding is not None else self.embedding
        x = self._drop(table(source), training)
        forward = self.encoder_forward(x, training=training)
        backward = tf.reverse_sequence(
            self.encoder_backward(tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0),
                                  training=training),
            lengths, seq_axis=1, batch_axis=0)
        h = tf.concat([forward, backward], axis=-1)
        for index, layer in enumerate(self.encoder_layers, start=2):
            y = layer(self._drop(h, training), training=training)
            h = y + h if index >= RESIDUAL_FROM else y
        return {"memory": h, "source_mask": mask}

    def _output_logits(self, h: tf.Tensor, context: tf.Tensor, training) -> tf.Tensor:
        out = self.attention_output(self._drop(tf.concat([h, context], axis=-1), training))
        return self.embedding.project(out)

    def call(self, inputs: Dict[str, tf.Tensor], training=None) -> tf.Tensor:
        encoded = self.encode(inputs["source"], training=training)
        memory, mask = encoded["memory"], encoded["source_mask"]
        x = self._drop(self.embedding(inputs["target_in"]), training)
        h = self.decoder_layers[0](x, training=training)
        context = self.attention(h, self.attention.keys(memory), memory, mask)
        for index, layer in enumerate(self.decoder_layers[1:], start=2):
            y = layer(self._drop(tf.concat([h, context], axis=-1), training), training=training)
            h = y + h if index >= RESIDUAL_FROM else y
        return self._output_logits(h, context, training)

    @property
    def beam_invariant_keys(self) -> Tuple[str, ...]:  # type: ignore[override]
        return ("memory", "keys", "source_mask")

    def initial_decoder_state(self, encoded: State) -> State:
        """Encoder outputs, projected attention keys, mask, and zero (h, c) per decoder layer."""
        memory = encoded["memory"]
        state = {"memory": memory, "keys": self.attention.keys(memory),
                 "source_mask": encoded["source_mask"]}
        zeros = tf.zeros([tf.shape(memory)[0], self.units], memory.dtype)  # bf16 under a mixed policy
        for i in range(len(self.decoder_layers)):
            state[f"h_{i}"], state[f"c_{i}"] = zeros, zeros
        return state

    def decode_step(self, ids: tf.Tensor, step: tf.Tensor, state: State) -> Tuple[tf.Tensor, State]:
        """One step of the same network: each LSTM's cell advances its (h, c) by one token."""
        new_state = dict(state)
        x = self.embedding(ids[:, -1])

        def advance(i: int, inputs: tf.Tensor) -> tf.Tensor:
            h, (h, c) = self.decoder_layers[i].cell(inputs, [state[f"h_{i}"], state[f"c_{i}"]],
                                                   training=False)
            new_state[f"h_{i}"], new_state[f"c_{i}"] = h, c
            return h

        h = advance(0, x)
        context = self.attention(h[:, None, :], state["keys"], state["memory"], state["source_mask"])[:, 0]
        for index in range(2, len(self.decoder_layers) + 1):
            y = advance(index - 1, tf.concat([h, context], axis=-1))
            h = y + h if index >= RESIDUAL_FROM else y
        return self._output_logits(h, context, False), new_state
