"""Both models: shapes, gradients, masking, teacher forcing == step-by-step decoding, config."""
import numpy as np
import pytest

from tests.models.helpers import CONFIGS, VOCAB, batch, labels, make
from tf_nmt.compat import tf
from tf_nmt.models.losses import label_smoothed_nll

NAMES = sorted(CONFIGS)


@pytest.fixture(scope="module", params=NAMES)
def model(request):
    return make(request.param)


def teacher_forced(model, source, target_in):
    return model({"source": source, "target_in": target_in}, training=False).numpy()


def stepwise(model, source, target_in):
    state = model.initial_decoder_state(model.encode(source))
    steps = []
    for t in range(target_in.shape[1]):
        logits, new_state = model.decode_step(target_in[:, : t + 1], tf.constant(t), state)
        assert sorted(new_state) == sorted(state)
        state = new_state
        steps.append(logits.numpy())
    return np.stack(steps, axis=1)


def test_forward_and_backward_shapes(model):
    x = batch()
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss, _ = label_smoothed_nll(labels(), logits, 0.1)
    assert logits.shape == (2, 5, VOCAB) and logits.dtype == tf.float32
    grads = tape.gradient(loss, model.trainable_variables)
    assert all(g is not None for g in grads)
    assert all(np.isfinite(tf.convert_to_tensor(g).numpy()).all() for g in grads)


def test_output_projection_is_tied_to_the_embedding(model):
    vocab_matrices = [v for v in model.trainable_variables if v.shape.rank == 2 and VOCAB in v.shape]
    assert [tuple(v.shape)[0] for v in vocab_matrices] == [VOCAB]


def test_dropout_only_in_training(model, request):
    x = batch()
    inference = model(x, training=False).numpy()
    np.testing.assert_array_equal(model(x, training=False).numpy(), inference)  # deterministic
    tf.random.set_seed(1)  # the draws below are reproducible; still two different masks
    first, second = model(x, training=True).numpy(), model(x, training=True).numpy()
    if CONFIGS[request.node.callspec.params["model"]][1]["dropout"] > 0:
        assert not np.allclose(first, inference, atol=1e-6)  # training drops units
        assert not np.allclose(first, second, atol=1e-6)  # afresh in every call
    else:  # no dropout configured: training and inference compute the same
        np.testing.assert_allclose(first, inference, atol=1e-6)
        np.testing.assert_allclose(second, inference, atol=1e-6)
    np.testing.assert_array_equal(model(x, training=False).numpy(), inference)  # nothing stuck


def test_decode_step_matches_teacher_forcing(model):
    x = batch()
    np.testing.assert_allclose(stepwise(model, x["source"], x["target_in"]),
                               teacher_forced(model, x["source"], x["target_in"]), atol=1e-4)


def test_source_padding_is_masked(model):
    x = batch()
    expected = teacher_forced(model, x["source"], x["target_in"])
    longer = tf.pad(x["source"], [[0, 0], [0, 3]])  # more padding
    np.testing.assert_allclose(teacher_forced(model, longer, x["target_in"]), expected, atol=1e-5)
    # Garbage in the encoder outputs at pad positions is never attended to.
    encoded = model.encode(x["source"])
    noise = tf.random.normal(tf.shape(encoded["memory"])) * (1.0 - encoded["source_mask"])[:, :, None]
    noisy = dict(encoded, memory=encoded["memory"] + 100.0 * noise)
    clean_logits, _ = model.decode_step(x["target_in"][:, :1], tf.constant(0),
                                        model.initial_decoder_state(encoded))
    noisy_logits, _ = model.decode_step(x["target_in"][:, :1], tf.constant(0),
                                        model.initial_decoder_state(noisy))
    np.testing.assert_allclose(noisy_logits.numpy(), clean_logits.numpy(), atol=1e-5)


def test_future_target_tokens_do_not_change_earlier_logits(model):
    x = batch()
    expected = teacher_forced(model, x["source"], x["target_in"])
    changed = tf.concat([x["target_in"][:, :3], tf.constant([[20, 21], [22, 23]])], axis=1)
    got = teacher_forced(model, x["source"], changed)
    np.testing.assert_allclose(got[:, :3], expected[:, :3], atol=1e-5)
    assert not np.allclose(got[:, 3:], expected[:, 3:])


def test_batch_rows_are_independent(model):
    x = batch()
    both = teacher_forced(model, x["source"], x["target_in"])
    first = teacher_forced(model, x["source"][:1], x["target_in"][:1])
    np.testing.assert_allclose(first[0], both[0], atol=1e-5)


def test_config_round_trip(model):
    clone = type(model).from_config(model.get_config())
    clone(batch())
    clone.set_weights(model.get_weights())
    assert clone.vocab_size == VOCAB
    np.testing.assert_allclose(teacher_forced(clone, **batch()), teacher_forced(model, **batch()),
                               atol=1e-6)


@pytest.mark.parametrize("name", ["transformer_post", "gnmt_luong"])  # tracing LSTMs is slow
def test_traces_with_unknown_batch_and_length(name):
    model = make(name)
    spec = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[spec, spec])
    def forward(source, target_in):
        return model({"source": source, "target_in": target_in})

    x = batch()
    np.testing.assert_allclose(forward(x["source"], x["target_in"]).numpy(),
                               teacher_forced(model, x["source"], x["target_in"]), atol=1e-5)
