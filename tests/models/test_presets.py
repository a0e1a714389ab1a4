"""The WMT-scale presets build the published shapes: their parameter counts equal the counts the
papers' layer shapes give, computed here from the formulas, not copied from a run.

Each model is built once on CPU (a forward pass over a two-sentence batch creates the weights);
nothing is trained.
"""
import gc

import pytest

from tf_nmt.compat import keras, tf
from tf_nmt.config import preset
from tf_nmt.models import build_model
from tests.models.helpers import batch

VOCAB = 32_000  # a 32k shared vocabulary, as the WMT14 en-de recipe in docs/own-data.md


def transformer_count(vocab: int, d: int, ff: int, layers: int, norm: str) -> int:
    """Weights of tf-nmt's Transformer with one shared, tied embedding and an output bias."""
    attention = 4 * (d * d + d)            # q, k, v and output projections, with biases
    ffn = d * ff + ff + ff * d + d         # two dense layers, with biases
    norm_params = 2 * d                    # gain and bias
    encoder = attention + ffn + 2 * norm_params
    decoder = 2 * attention + ffn + 3 * norm_params
    final = 2 * norm_params if norm == "pre" else 0  # pre-norm ends each stack with a norm
    return vocab * d + vocab + layers * (encoder + decoder) + final


def lstm(inputs: int, units: int) -> int:
    return 4 * units * (inputs + units + 1)  # Keras: kernel, recurrent kernel, one bias


def gnmt_count(vocab: int, units: int, layers: int) -> int:
    """Weights of tf-nmt's GNMT (Luong attention, embedding width = units, output bias)."""
    encoder = 2 * lstm(units, units)                    # bidirectional bottom layer
    encoder += lstm(2 * units, units)                   # layer 2 reads both directions
    encoder += (layers - 2) * lstm(units, units)        # layers 3.. (residual)
    decoder = lstm(units, units)                        # layer 1 reads the embeddings
    decoder += (layers - 1) * lstm(2 * units, units)    # upper layers read [h; context]
    attention = units * units                           # Luong key projection, no bias
    attention_output = 2 * units * units                # tanh(W [h; c]), no bias
    return vocab * units + vocab + encoder + decoder + attention + attention_output


def built_count(name: str) -> int:
    cfg = preset(name)
    model = build_model(cfg.model.kind, VOCAB, **cfg.model.hparams)
    model(batch(), training=False)
    count = model.count_params()
    del model
    gc.collect()
    return count


@pytest.mark.parametrize("name, d, heads, ff, dropout, published", [
    # Vaswani et al. 2017, Table 3: base 65M, big 213M parameters (with a 37k vocabulary)
    ("transformer-base", 512, 8, 2048, 0.1, (58e6, 66e6)),
    ("transformer-big", 1024, 16, 4096, 0.3, (200e6, 215e6)),
])
def test_transformer_presets_have_the_papers_shape(name, d, heads, ff, dropout, published):
    cfg = preset(name)
    hp = cfg.model.hparams
    assert cfg.model.kind == "transformer"
    assert (hp["num_layers"], hp["d_model"], hp["num_heads"], hp["ff_dim"], hp["dropout"],
            hp["norm"]) == (6, d, heads, ff, dropout, "post")
    assert cfg.train.schedule == "warmup_inverse_sqrt" and cfg.train.warmup_steps == 4000
    # the paper's rate d^-0.5 * min(s^-0.5, s * w^-1.5) peaks at d^-0.5 * w^-0.5
    assert cfg.train.peak_lr == pytest.approx(d ** -0.5 * 4000 ** -0.5, rel=0.02)
    assert cfg.train.label_smoothing == 0.1 and not cfg.train.scale_lr_with_workers
    expected = transformer_count(VOCAB, d, ff, 6, "post")
    assert published[0] < expected < published[1]
    assert built_count(name) == expected


def test_gnmt_preset_has_the_papers_shape(monkeypatch):
    # The LSTMs' orthogonal initializer runs a QR decomposition per recurrent kernel (~25 s for
    # these 17 on 2 cores); the count needs the shapes only, so their initial values are zeros.
    def zeros(self, shape, dtype=None, **kwargs):
        return tf.zeros(shape, dtype or "float32")

    monkeypatch.setattr(keras.initializers.Orthogonal, "__call__", zeros)
    cfg = preset("gnmt-1024")
    hp = cfg.model.hparams
    assert cfg.model.kind == "gnmt" and (hp["num_layers"], hp["units"]) == (8, 1024)
    expected = gnmt_count(VOCAB, 1024, 8)
    assert 200e6 < expected < 225e6
    assert built_count("gnmt-1024") == expected


def test_the_formulas_match_small_models_too():
    """The counting formulas themselves, on tiny models of both norms and depths."""
    for norm in ("pre", "post"):
        model = build_model("transformer", 50, num_layers=2, d_model=16, num_heads=2, ff_dim=24,
                            norm=norm)
        model(batch(), training=False)
        assert model.count_params() == transformer_count(50, 16, 24, 2, norm)
    model = build_model("gnmt", 50, num_layers=3, units=8, attention="luong")
    model(batch(), training=False)
    assert model.count_params() == gnmt_count(50, 8, 3)
