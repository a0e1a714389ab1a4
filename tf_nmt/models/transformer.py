"""Transformer encoder-decoder (Vaswani et al. 2017) with tied shared embeddings (with
``source_vocab_size``, separate vocabularies: the encoder gets a source table of its own, the
target embedding stays tied to the output projection).

Decoding is incremental: ``initial_decoder_state`` projects the encoder output to per-layer
cross-attention keys/values once, and each ``decode_step`` appends one position to a per-layer
self-attention key/value cache, so a step costs O(t) instead of re-running the whole prefix.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

from tf_nmt.compat import tf
from tf_nmt.models.activation_quant import ActivationQuantization
from tf_nmt.models.dropout import make_dropout
from tf_nmt.models.layer_norm import make_layer_norm
from tf_nmt.models.attention import causal_bias, padding_bias
from tf_nmt.models.base import Seq2SeqModel, State, padding_mask
from tf_nmt.models.embedding import SharedEmbedding, sinusoidal_positions
from tf_nmt.models.transformer_layers import DecoderLayer, EncoderLayer

TRANSFORMER_DEFAULTS: Dict[str, object] = {
    "num_layers": 3, "num_encoder_layers": None, "num_decoder_layers": None, "d_model": 256,
    "num_heads": 4, "ff_dim": 1024, "dropout": 0.1, "attention_dropout": 0.0, "norm": "pre",
    "output_bias": True, "tie_embeddings": True,
}


class Transformer(Seq2SeqModel):
    """Encoder-decoder Transformer; ``num_encoder_layers``/``num_decoder_layers`` default to ``num_layers``."""

    def __init__(self, vocab_size: int, num_layers: int = 3, num_encoder_layers: Optional[int] = None,
                 num_decoder_layers: Optional[int] = None, d_model: int = 256, num_heads: int = 4,
                 ff_dim: int = 1024, dropout: float = 0.1, attention_dropout: float = 0.0,
                 norm: str = "pre", output_bias: bool = True, tie_embeddings: bool = True,
                 name: str = "transformer",
                 activation_quantization: Optional[ActivationQuantization] = None,
                 source_vocab_size: Optional[int] = None) -> None:
        hparams = dict(num_layers=num_layers, num_encoder_layers=num_encoder_layers,
                       num_decoder_layers=num_decoder_layers, d_model=d_model, num_heads=num_heads,
                       ff_dim=ff_dim, dropout=dropout, attention_dropout=attention_dropout,
                       norm=norm, output_bias=output_bias, tie_embeddings=tie_embeddings)
        super().__init__(vocab_size, name, hparams, activation_quantization, source_vocab_size)
        aq = self.activation_quantization
        n_enc = num_encoder_layers or num_layers
        n_dec = num_decoder_layers or num_layers
        self.d_model, self.num_heads = d_model, num_heads
        self.embedding = SharedEmbedding(vocab_size, d_model, scale=True, output_bias=output_bias,
                                         tie_output=tie_embeddings, activation_quantization=aq,
                                         name="shared_embedding")
        self.embedding.build(None)
        # separate vocabularies: the encoder looks up a table of its own (same init and scale)
        self.source_embedding = None
        if source_vocab_size is not None:
            self.source_embedding = SharedEmbedding(source_vocab_size, d_model, scale=True,
                                                    output_bias=False, name="source_embedding")
            self.source_embedding.build(None)
        args = (d_model, num_heads, ff_dim, dropout, attention_dropout, norm, aq)
        self.encoder_layers = [EncoderLayer(*args, name=f"encoder_{i}") for i in range(n_enc)]
        self.decoder_layers = [DecoderLayer(*args, name=f"decoder_{i}") for i in range(n_dec)]
        self.pre_norm = norm == "pre"
        if self.pre_norm:  # pre-norm stacks end un-normalised: add a final norm to each
            self.encoder_norm = make_layer_norm(1e-6, name="encoder_norm")
            self.decoder_norm = make_layer_norm(1e-6, name="decoder_norm")
        self.dropout = make_dropout(dropout)

    def _embed(self, ids: tf.Tensor, positions: tf.Tensor, training, source: bool = False
               ) -> tf.Tensor:
        table = self.source_embedding if source and self.source_embedding is not None \
            else self.embedding
        x = table(ids)
        x = x + tf.cast(sinusoidal_positions(positions, self.d_model), x.dtype)
        return self.dropout(x, training=training) if self.dropout is not None else x

    def encode(self, source: tf.Tensor, training: bool = False) -> State:
        """``{"memory": [B,S,d], "source_mask": [B,S]}`` (mask 1.0 on real tokens)."""
        mask = padding_mask(source)
        bias = padding_bias(mask)
        x = self._embed(source, tf.range(tf.shape(source)[1]), training, source=True)
        for layer in self.encoder_layers:
            x = layer(x, bias, training=training)
        if self.pre_norm:
            x = self.encoder_norm(x)
        return {"memory": x, "source_mask": mask}

    def _decoder_output(self, x: tf.Tensor) -> tf.Tensor:
        return self.embedding.project(self.decoder_norm(x) if self.pre_norm else x)

    def call(self, inputs: Dict[str, tf.Tensor], training=None) -> tf.Tensor:
        encoded = self.encode(inputs["source"], training=training)
        target = inputs["target_in"]
        length = tf.shape(target)[1]
        memory_bias = padding_bias(encoded["source_mask"])
        self_bias = causal_bias(length)
        x = self._embed(target, tf.range(length), training)
        for layer in self.decoder_layers:
            kv = layer.cross_attention.memory_kv(encoded["memory"])
            x, _ = layer(x, self_bias, kv, memory_bias, training=training)
        return self._decoder_output(x)

    def initial_decoder_state(self, encoded: State) -> State:
        """Source mask, per-layer cross-attention k/v [B,H,S,depth] and empty self-attention caches."""
        memory = encoded["memory"]
        batch = tf.shape(memory)[0]
        empty = tf.zeros([batch, self.num_heads, 0, self.d_model // self.num_heads],
                         memory.dtype)  # bf16 under a mixed policy
        state = {"source_mask": encoded["source_mask"]}
        for i, layer in enumerate(self.decoder_layers):
            state[f"cross_k_{i}"], state[f"cross_v_{i}"] = layer.cross_attention.memory_kv(memory)
            state[f"self_k_{i}"], state[f"self_v_{i}"] = empty, empty
        return state

    @property
    def beam_invariant_keys(self) -> Tuple[str, ...]:  # type: ignore[override]
        keys = ["source_mask"]
        for i in range(len(self.decoder_layers)):
            keys += [f"cross_k_{i}", f"cross_v_{i}"]
        return tuple(keys)

    def decode_step(self, ids: tf.Tensor, step: tf.Tensor, state: State) -> Tuple[tf.Tensor, State]:
        """Logits [B,V] for the token after ``ids[:, step]``; only the last token is embedded."""
        x = self._embed(ids[:, -1:], tf.reshape(step, [1]), training=False)
        memory_bias = padding_bias(state["source_mask"])
        new_state = dict(state)
        for i, layer in enumerate(self.decoder_layers):
            cache = (state[f"self_k_{i}"], state[f"self_v_{i}"])
            kv = (state[f"cross_k_{i}"], state[f"cross_v_{i}"])
            x, (k, v) = layer(x, None, kv, memory_bias, cache=cache, training=False)
            new_state[f"self_k_{i}"], new_state[f"self_v_{i}"] = k, v
        return self._decoder_output(x)[:, 0, :], new_state
