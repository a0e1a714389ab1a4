"""``source_vocab_size``: separate source/target vocabularies. Unset, a model has exactly the
variables it always had (old checkpoints load); set, the encoder looks its (larger or smaller)
source ids up in a table of its own while the target embedding stays tied to the output layer,
and the model trains."""
import numpy as np
import pytest

from tests.models.helpers import CONFIGS, VOCAB, batch, labels
from tf_nmt.compat import KERAS3, keras, tf, variable_name
from tf_nmt.models import build_model
from tf_nmt.models.losses import label_smoothed_nll
from tf_nmt.run_dir import build_initialised_model

SOURCE_VOCAB = 41  # larger than VOCAB: source ids above the target vocabulary exist


# Keras 2 names an embedding's table without its layer, Keras 3 with it (compat.variable_name)
TABLE = "shared_embedding/embeddings" if KERAS3 else "embeddings"
SOURCE_TABLE = "source_embedding/embeddings" if KERAS3 else "embeddings"


def variables(model):
    return [(variable_name(v), tuple(v.shape)) for v in model.weights]


def source_batch():
    """``batch()`` with source ids the target vocabulary does not have (>= VOCAB)."""
    x = dict(batch())
    x["source"] = tf.constant([[35, 6, 40, 8, 3, 0], [30, 10, 3, 0, 0, 0]], tf.int32)
    return x


@pytest.mark.parametrize("name", ["transformer_pre", "gnmt_luong"])
def test_unset_builds_the_same_variables_and_set_adds_one_source_table(name):
    kind, hparams = CONFIGS[name]
    shared = build_model(kind, VOCAB, **hparams)
    shared(batch())
    assert shared.get_config()["source_vocab_size"] is None and shared.source_embedding is None
    # the shared model's embedding variables are today's: one table (+ output bias)
    assert [n for n, _ in variables(shared) if "embeddings" in n] == [TABLE]
    separate = build_model(kind, VOCAB, source_vocab_size=SOURCE_VOCAB, **hparams)
    separate(source_batch())
    dim = shared.embedding.dim
    extra = list(variables(separate))
    extra.remove((SOURCE_TABLE, (SOURCE_VOCAB, dim)))
    assert extra == variables(shared)  # everything else: same names, shapes and order
    config = separate.get_config()
    assert config["source_vocab_size"] == SOURCE_VOCAB and config["vocab_size"] == VOCAB
    assert type(separate).from_config(config).source_vocab_size == SOURCE_VOCAB


def test_an_old_shared_checkpoint_restores_into_a_model_built_without_source_vocab(tmp_path):
    kind, hparams = CONFIGS["transformer_pre"]
    old = build_model(kind, VOCAB, **hparams)
    old(batch())
    prefix = tf.train.Checkpoint(model=old).save(str(tmp_path / "ckpt"))
    new = build_model(kind, VOCAB, **hparams)
    new(batch())
    tf.train.Checkpoint(model=new).restore(prefix).assert_consumed()
    for a, b in zip(old.get_weights(), new.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["transformer_post", "gnmt_bahdanau"])
def test_the_encoder_reads_the_source_table_and_the_model_trains(name):
    kind, hparams = CONFIGS[name]
    tf.random.set_seed(1)
    model = build_model(kind, VOCAB, source_vocab_size=SOURCE_VOCAB,
                        **{**hparams, "dropout": 0.0})
    x, y = source_batch(), labels()
    logits = model(x)
    assert logits.shape == (2, 5, VOCAB)  # the logits are the target vocabulary's
    optimizer = keras.optimizers.Adam(0.01)
    losses = []
    for _ in range(15):
        with tf.GradientTape() as tape:
            loss, _ = label_smoothed_nll(y, model(x, training=True), 0.0)
        grads = tape.gradient(loss, model.trainable_variables)
        by_var = {id(v): g for v, g in zip(model.trainable_variables, grads)}
        source_grad = tf.convert_to_tensor(by_var[id(model.source_embedding.embeddings)])
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        losses.append(float(loss))
    # the rows of the source ids (35 and 40 exist only in the source table) get gradient
    assert float(tf.reduce_sum(tf.abs(source_grad[35]))) > 0
    assert float(tf.reduce_sum(tf.abs(source_grad[40]))) > 0
    assert losses[-1] < 0.8 * losses[0], losses


def test_a_mixed_precision_model_with_a_source_table_builds_and_runs():
    kind, hparams = CONFIGS["transformer_pre"]
    model = build_initialised_model(kind, VOCAB, hparams, policy="mixed_bfloat16",
                                    source_vocab_size=SOURCE_VOCAB)
    logits = model(source_batch())
    assert logits.dtype == tf.float32 and logits.shape == (2, 5, VOCAB)
    assert model.source_embedding.compute_dtype == "bfloat16"
