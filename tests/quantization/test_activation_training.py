"""Training with log-quantised matmul inputs (train.quantize_activations_*) on the toy corpus, with
4-bit weight re-training: loss falls for both models, the run's model is rebuilt quantised, and
the exported SavedModel (stock ops only, served in a TF-only process) translates exactly as
evaluation does."""
import numpy as np
import pytest

pytestmark = pytest.mark.slow  # trains tiny models for real

from tests.helpers import write_toy_data_dir
from tests.training.test_trainer import TINY, tiny_config
from tf_nmt.compat import tf
from tf_nmt.config import load_config
from tf_nmt.inference.serving_graph import make_translate_fn, translate_texts
from tf_nmt.export.saved_model import export_saved_model
from tf_nmt.models.activation_quant import ActivationQuantization
from tf_nmt.commands.quickstart import serve_in_fresh_process
from tf_nmt.run_dir import load_trained_model
from tf_nmt.training.trainer import train

QUANT = ["train.quantize_activations_bits=4", "train.quantize_activations_scale=2.0",
         "train.quantize_bits=4"]
GNMT = ["model.kind=gnmt", "model.num_layers=2", "model.units=32", "model.attention=luong",
        "model.dropout=0.0"]
TEXTS = ["The file is new.", "The dog is old.", "", "The window is empty."]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_toy_data_dir(tmp_path_factory.mktemp("actq") / "data")


def _train(data_dir, run, *extra, steps=60):
    return train(tiny_config(data_dir, f"train.train_steps={steps}", "train.steps_per_cycle=20",
                             *QUANT, *extra), run, log=lambda _m: None)


@pytest.fixture(scope="module")
def transformer_run(data_dir, tmp_path_factory):
    run = tmp_path_factory.mktemp("actq_run") / "transformer"
    return run, _train(data_dir, run)


def test_transformer_trains_with_quantised_matmul_inputs(transformer_run):
    run, result = transformer_run
    losses = [h["loss"] for h in result.history]
    assert losses[-1] < 0.7 * losses[0]
    model, _, cfg = load_trained_model(run)
    assert model.activation_quantization == ActivationQuantization(4, 2.0)
    kernel = next(v for v in model.trainable_weights if len(v.shape) == 2).numpy()
    assert len(np.unique(np.abs(kernel))) <= 8  # weights stayed on the 4-bit log grid


def test_gnmt_trains_with_quantised_matmul_inputs(data_dir, tmp_path):
    common = [o for o in TINY if not o.startswith("model.")]
    cfg = load_config(None, common + GNMT + QUANT + [f"data.data_dir={data_dir}",
                                                     "train.train_steps=60", "train.steps_per_cycle=20"])
    result = train(cfg, tmp_path / "gnmt", log=lambda _m: None)
    losses = [h["loss"] for h in result.history]
    assert losses[-1] < 0.7 * losses[0]
    model, _, _ = load_trained_model(tmp_path / "gnmt")
    assert model.decoder_layers[0].cell.activation_quantization == ActivationQuantization(4, 2.0)


def test_served_output_equals_evaluated_output(transformer_run, tmp_path):
    run, _ = transformer_run
    model, tokenizer, _ = load_trained_model(run)
    evaluated = translate_texts(make_translate_fn(model, tokenizer, beam_size=2), tokenizer, TEXTS)
    export_dir = export_saved_model(model, tokenizer, tmp_path / "export", beam_size=2)
    pb = (export_dir / "saved_model.pb").read_bytes()
    assert b"LogQuantize" not in pb and b"Lowprec" not in pb  # stock ops only
    assert b"BitwiseAnd" in pb  # the stock quantiser is in the graph
    loaded = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
    served = [t.decode() for t in loaded(texts=tf.constant(TEXTS))["translations"].numpy()]
    assert served == evaluated
    assert serve_in_fresh_process(export_dir, TEXTS) == evaluated  # no tf_nmt op library there
