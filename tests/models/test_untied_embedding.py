"""Transformer ``tie_embeddings``: what kind of gradient the embedding gets (it decides whether
Horovod allgathers or allreduces it, see python -m experiments accumulation)."""
import numpy as np

from tests.models.helpers import VOCAB, batch, labels
from tf_nmt.compat import tf, variable_name
from tf_nmt.models import build_model
from tf_nmt.models.losses import label_smoothed_nll

HPARAMS = dict(num_layers=1, d_model=8, num_heads=2, ff_dim=16, dropout=0.0)


def grads(tie: bool):
    tf.random.set_seed(0)
    model = build_model("transformer", VOCAB, tie_embeddings=tie, **HPARAMS)
    x = batch()
    with tf.GradientTape() as tape:
        loss, _ = label_smoothed_nll(labels(), model(x, training=True), 0.1)
    # keyed by compat.variable_name: Keras 3 prefixes the layer (shared_embedding/embeddings)
    return model, dict(zip([variable_name(v) for v in model.trainable_variables],
                           tape.gradient(loss, model.trainable_variables)))


def test_tied_embedding_gradient_is_dense():
    model, g = grads(tie=True)
    table = variable_name(model.embedding.embeddings)
    assert [n for n in g if "embeddings" in n] == [table]
    assert isinstance(g[table], tf.Tensor)  # lookups + projection summed densely


def test_untied_embedding_gradient_is_the_lookups_indexed_slices():
    model, g = grads(tie=False)
    emb = g[variable_name(model.embedding.embeddings)]
    out = g[variable_name(model.embedding.output_embeddings)]
    assert isinstance(emb, tf.IndexedSlices) and isinstance(out, tf.Tensor)
    x = batch()
    looked_up = int(tf.size(x["source"])) + int(tf.size(x["target_in"]))  # padded ids included
    assert emb.values.shape == (looked_up, HPARAMS["d_model"])
    assert tuple(out.shape) == (VOCAB, HPARAMS["d_model"])
    # rows of ids never looked up get no gradient
    dense = tf.convert_to_tensor(emb).numpy()
    unused = sorted(set(range(VOCAB)) - set(np.concatenate(
        [x["source"].numpy().ravel(), x["target_in"].numpy().ravel()]).tolist()))
    assert np.all(dense[unused] == 0) and np.abs(dense).sum() > 0


def test_untied_matrices_start_different():
    model, _ = grads(tie=False)
    emb = model.embedding
    assert emb.output_embeddings is not emb.embeddings
    assert np.abs(emb.output_embeddings.numpy() - emb.embeddings.numpy()).max() > 1e-3


def test_untied_model_trains_and_decodes_shapes():
    model, _ = grads(tie=False)
    logits = model(batch(), training=False)
    assert logits.shape == (2, 5, VOCAB)
    assert model.get_config()["tie_embeddings"] is False
