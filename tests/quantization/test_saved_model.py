"""The packed-weight SavedModel: its stored weights are the packed codes (>= 7x fewer bytes
than the float32 export), it translates like the dequantised model in-process, and it serves
from a fresh process that imports only tensorflow + tensorflow_text."""
import pytest

pytestmark = pytest.mark.slow  # two exports + a fresh TF process

import numpy as np

from tests.helpers import write_toy_data_dir
from tf_nmt.compat import keras, tf
from tf_nmt.config import load_config
from tf_nmt.data.data_dir import ensure_vocab
from tf_nmt.inference.serving_graph import make_translate_fn, translate_texts
from tf_nmt.models import build_model
from tf_nmt.commands.quantize import export_sizes
from tf_nmt.quantization.packed_file import PackedModel
from tf_nmt.quantization.policy import QuantPolicy
from tf_nmt.quantization.quantize import quantize_model
from tf_nmt.commands.quantized_runs import model_from_packed
from tf_nmt.export.packed_saved_model import export_packed_saved_model, variable_slots
from tf_nmt.commands.quickstart import serve_in_fresh_process

TEXTS = ["The file is new.", "The dog is old.", "", "The window is empty."]
HPARAMS = {"num_layers": 1, "d_model": 128, "num_heads": 4, "ff_dim": 512, "dropout": 0.0}


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """A packed 4-bit model (random weights: serving equality, not quality, is under test)."""
    root = tmp_path_factory.mktemp("packed")
    tokenizer = ensure_vocab(write_toy_data_dir(root / "data"), 320, log=lambda _m: None)
    cfg = load_config(None, ["model.kind=transformer"] + [f"model.{k}={v}" for k, v in HPARAMS.items()])
    keras.utils.set_random_seed(3)
    model = build_model("transformer", tokenizer.vocab_size, **HPARAMS)
    model({"source": tf.ones([1, 4], tf.int32), "target_in": tf.ones([1, 4], tf.int32)})
    policy = QuantPolicy(bits=4)
    return PackedModel(policy, quantize_model(model, policy), cfg.to_dict(), tokenizer.model_proto)


def test_serves_in_a_fresh_process_and_is_seven_times_smaller(packed, tmp_path):
    model, tokenizer, _ = model_from_packed(packed)
    expected = translate_texts(make_translate_fn(model, tokenizer, beam_size=2), tokenizer, TEXTS)
    export_dir = export_packed_saved_model(model, tokenizer, packed, tmp_path / "q4", beam_size=2)
    loaded = tf.saved_model.load(str(export_dir))
    quantized = [e for e in packed.entries if e.quantized]
    assert loaded.codes.dtype == tf.uint8  # the weights on disk: one stream of 4-bit codes
    assert loaded.codes.shape == [sum(e.size for e in quantized) // 2]
    assert loaded.scales.shape == [len(quantized)]
    assert loaded.kept.shape == [sum(e.size for e in packed.entries if not e.quantized)]  # biases, norms
    here = loaded.signatures["serving_default"](texts=tf.constant(TEXTS))["translations"].numpy()
    assert [t.decode() for t in here] == expected
    assert serve_in_fresh_process(export_dir, TEXTS) == expected
    sizes = export_sizes(model, tokenizer, export_dir, 2, 0.6)
    assert sizes["variables_ratio"] >= 7.0, sizes
    assert sizes["total_ratio"] > 2.0, sizes  # the graph and the vocabulary are not compressed
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


def test_refuses_to_overwrite(packed, tmp_path):
    model, tokenizer, _ = model_from_packed(packed)
    target = tmp_path / "q4"
    target.mkdir()
    with pytest.raises(FileExistsError, match="--overwrite"):
        export_packed_saved_model(model, tokenizer, packed, target, beam_size=1)


def test_every_variable_is_reached_through_a_layer_attribute(packed):
    model, _, _ = model_from_packed(packed)
    slots = variable_slots(model)
    assert len(slots) == len(model.weights) and all(slots)
    for var, group in zip(model.weights, slots):
        assert all(getattr(layer, attr) is var for layer, attr in group)
    np.testing.assert_array_equal(model.weights[0].numpy(), packed.entries[0].dequantize(packed.policy))


def test_a_float32_variable_left_in_the_serving_graph_is_refused(packed, tmp_path, monkeypatch):
    """The guard sees the model's own variables in the traced graph on both Keras versions
    (Keras 3's variables are captured through the ``tf.Variable`` they hold)."""
    import contextlib

    from tf_nmt.export import packed_saved_model

    model, tokenizer, _ = model_from_packed(packed)
    monkeypatch.setattr(packed_saved_model, "swapped", lambda *_a: contextlib.nullcontext())
    with pytest.raises(RuntimeError, match="still reads float32 model variables"):
        export_packed_saved_model(model, tokenizer, packed, tmp_path / "q4", beam_size=1)
    assert not (tmp_path / "q4").exists()
