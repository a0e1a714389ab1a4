"""Tiny model configurations and batches shared by the model tests."""
from tf_nmt.compat import tf
from tf_nmt.models import build_model

VOCAB = 29

CONFIGS = {
    "transformer_pre": ("transformer", dict(num_layers=2, d_model=16, num_heads=2, ff_dim=32,
                                            dropout=0.1, attention_dropout=0.1, norm="pre")),
    "transformer_post": ("transformer", dict(num_encoder_layers=1, num_decoder_layers=2, d_model=16,
                                             num_heads=4, ff_dim=24, dropout=0.1, norm="post")),
    "gnmt_luong": ("gnmt", dict(num_layers=3, units=16, embedding_dim=12, attention="luong",
                                dropout=0.1)),
    "gnmt_bahdanau": ("gnmt", dict(num_layers=2, units=12, attention="bahdanau", dropout=0.1)),
    "gnmt_one_layer": ("gnmt", dict(num_layers=1, units=8, attention="luong", dropout=0.0)),
}


def make(name: str, seed: int = 0):
    """A built (called once) tiny model."""
    tf.random.set_seed(seed)
    kind, hparams = CONFIGS[name]
    model = build_model(kind, VOCAB, **hparams)
    model(batch())
    return model


def batch():
    """Two sentences of different lengths, padded: source ends in eos, target_in starts with bos."""
    source = tf.constant([[5, 6, 7, 8, 3, 0], [9, 10, 3, 0, 0, 0]], tf.int32)
    target_in = tf.constant([[2, 11, 12, 13, 14], [2, 15, 16, 0, 0]], tf.int32)
    return {"source": source, "target_in": target_in}


def labels():
    return tf.constant([[11, 12, 13, 14, 3], [15, 16, 3, 0, 0]], tf.int32)
