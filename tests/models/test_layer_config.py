"""Keras layers round-trip through get_config, and export saves every layer fully."""
import logging

import pytest

from tf_nmt.compat import tf
from tf_nmt.models.attention import MultiHeadAttention
from tf_nmt.models.embedding import SharedEmbedding
from tf_nmt.models.rnn_attention import BahdanauAttention, LuongAttention
from tf_nmt.models.transformer_layers import DecoderLayer, EncoderLayer, FeedForward, Residual

LAYERS = [
    (Residual, dict(norm="post", dropout=0.2)),
    (FeedForward, dict(d_model=8, ff_dim=16)),
    (EncoderLayer, dict(d_model=8, num_heads=2, ff_dim=16, dropout=0.1, attention_dropout=0.05,
                        norm="pre")),
    (DecoderLayer, dict(d_model=8, num_heads=2, ff_dim=16, dropout=0.0, attention_dropout=0.0,
                        norm="post")),
    (MultiHeadAttention, dict(d_model=8, num_heads=4, dropout=0.1, self_attention=False)),
    (SharedEmbedding, dict(vocab_size=50, dim=8, scale=True, output_bias=False, tie_output=False)),
    (LuongAttention, dict(units=6)),
    (BahdanauAttention, dict(units=6)),
]


@pytest.mark.parametrize("cls, kwargs", LAYERS, ids=[c.__name__ for c, _ in LAYERS])
def test_get_config_round_trip(cls, kwargs):
    layer = cls(**kwargs, name="probe")
    config = layer.get_config()
    assert {k: config[k] for k in kwargs} == kwargs
    clone = cls.from_config(config)
    assert clone.get_config() == config


def test_residual_is_built_by_its_block():
    layer = EncoderLayer(8, 2, 16, 0.0, 0.0, "pre")
    x = tf.random.normal([2, 3, 8])
    layer(x, tf.zeros([2, 1, 1, 3]))
    assert layer.res1.built and layer.res2.built and layer.attention.built


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_export_saves_every_layer_fully(tmp_path):
    """TF-Keras warns "Skipping full serialization of TF-Keras layer ... not built" for layers
    whose __call__ was never used; every layer of both models must be built."""
    from tests.helpers import toy_pairs
    from tf_nmt.data.tokenizer import SubwordTokenizer, train_sentencepiece
    from tf_nmt.export.saved_model import export_saved_model
    from tf_nmt.run_dir import build_initialised_model

    tokenizer = SubwordTokenizer(train_sentencepiece([t for p in toy_pairs() for t in p] * 10, 300))
    models = {"transformer": dict(num_layers=1, d_model=16, num_heads=2, ff_dim=32),
              "gnmt": dict(num_layers=2, units=16)}
    collect = _Collect()
    tf.get_logger().addHandler(collect)  # TF's logger does not propagate to the root logger
    try:
        for kind, hparams in models.items():
            model = build_initialised_model(kind, tokenizer.vocab_size, hparams)
            export_saved_model(model, tokenizer, tmp_path / kind, beam_size=2, length_penalty=0.6)
    finally:
        tf.get_logger().removeHandler(collect)
    assert (tmp_path / "gnmt" / "saved_model.pb").is_file()
    assert [m for m in collect.messages if "Skipping full serialization" in m] == []
