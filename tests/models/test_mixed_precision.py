"""Both model kinds under the mixed bfloat16 policy: float32 variables and logits, bf16 compute
that tracks the float32 model with the same weights, incremental decoding that matches the
teacher-forced pass, and a GNMT that trains in mixed bf16 and loads back in float32."""
import numpy as np
import pytest

from tf_nmt.compat import KERAS3, tf, variable_name
from tf_nmt.run_dir import build_initialised_model

pytestmark = pytest.mark.keras2  # also in CI's Keras 2 pass

KINDS = {
    "transformer": {"num_layers": 2, "d_model": 64, "num_heads": 4, "ff_dim": 128, "dropout": 0.0},
    "gnmt-luong": {"num_layers": 3, "units": 64, "attention": "luong", "dropout": 0.0},
    "gnmt-bahdanau": {"num_layers": 3, "units": 64, "attention": "bahdanau", "dropout": 0.0},
}
VOCAB = 300


def pair(kind):
    hparams = KINDS[kind]
    name = kind.split("-")[0]
    tf.random.set_seed(3)
    full = build_initialised_model(name, VOCAB, hparams)
    mixed = build_initialised_model(name, VOCAB, hparams, policy="mixed_bfloat16")
    mixed.set_weights(full.get_weights())
    return full, mixed


def assert_float32_variables(model):
    """Every variable float32, none bf16; but Keras 3 gives each LSTM cell an int64 random-seed
    state (``seed_generator_N/seed_generator_state``, a Keras 3 feature, also in float32 models)."""
    for v in model.variables:
        if KERAS3 and variable_name(v).endswith("/seed_generator_state"):
            assert v.dtype == tf.int64, variable_name(v)
        else:
            assert v.dtype == tf.float32, (variable_name(v), v.dtype)


def batch(seed=0):
    rng = np.random.default_rng(seed)
    source = rng.integers(3, VOCAB, (4, 11)).astype(np.int32)
    source[1, 7:] = 0  # padding: masked positions must stay masked in bf16
    target = rng.integers(3, VOCAB, (4, 6)).astype(np.int32)
    return {"source": tf.constant(source), "target_in": tf.constant(target)}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_mixed_logits_are_float32_and_track_the_float32_model(kind):
    full, mixed = pair(kind)
    assert_float32_variables(mixed)
    inputs = batch()
    ref = tf.nn.log_softmax(full(inputs)).numpy()
    got = mixed(inputs)
    assert got.dtype == tf.float32
    got = tf.nn.log_softmax(got).numpy()
    assert np.isfinite(got).all()
    # bf16 keeps 8 significant bits: log-probabilities agree to a few hundredths, and so does
    # the ranking of the likely tokens.
    assert np.abs(got - ref).max() < 0.15, np.abs(got - ref).max()
    assert np.mean(got.argmax(-1) == ref.argmax(-1)) > 0.9


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_mixed_incremental_decoding_matches_the_teacher_forced_pass(kind):
    _, mixed = pair(kind)
    inputs = batch(1)
    forced = mixed(inputs).numpy()
    state = mixed.initial_decoder_state(mixed.encode(inputs["source"]))
    target = inputs["target_in"]
    for step in range(3):
        logits, state = mixed.decode_step(target[:, :step + 1], tf.constant(step), state)
        assert logits.dtype == tf.float32
        np.testing.assert_allclose(logits.numpy(), forced[:, step], atol=0.15)


@pytest.mark.slow
def test_gnmt_trains_in_mixed_bfloat16_and_loads_in_float32(tmp_path):
    from tests.helpers import write_toy_data_dir
    from tf_nmt.config import load_config
    from tf_nmt.run_dir import load_trained_model
    from tf_nmt.training.trainer import train

    data = write_toy_data_dir(tmp_path / "data")
    cfg = load_config(None, ["model.kind=gnmt", "model.num_layers=2", "model.units=32",
                             "model.dropout=0.0", "data.vocab_size=320", "data.batch_tokens=256",
                             "train.peak_lr=0.003", "train.warmup_steps=10", "train.log_every=5",
                             "train.train_steps=60", "train.steps_per_cycle=30",
                             "train.mixed_precision=true", f"data.data_dir={data}"])
    result = train(cfg, tmp_path / "run", log=lambda _m: None)
    losses = [h["loss"] for h in result.history]
    assert np.isfinite(losses).all() and losses[-1] < 0.7 * losses[0]
    assert result.val_loss[-1] < result.val_loss[0]
    model, _, _ = load_trained_model(tmp_path / "run")
    assert model.dtype_policy.name == "float32"
    assert_float32_variables(model)
