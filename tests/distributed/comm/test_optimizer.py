"""The gradient-exchanging optimizer in a single-process model.fit (the allgather is local)."""
import numpy as np

import pytest

from tf_nmt.compat import keras, tf
from tf_nmt.distributed import SINGLE
from tf_nmt.distributed.comm import CommSettings, wrap_optimizer
from tf_nmt.distributed.comm.optimizer import RESIDUAL_SLOT, exchange_of
from tf_nmt.training.schedules import build_schedule

pytestmark = pytest.mark.keras2_only  # Keras 2's legacy optimizers; Keras 3's: test_optimizer_keras3.py

VOCAB, LENGTH = 50, 6


def model(seed=3):
    keras.utils.set_random_seed(seed)
    m = keras.Sequential([keras.layers.Embedding(VOCAB, 8, name="embedding"),
                          keras.layers.GlobalAveragePooling1D(), keras.layers.Dense(4, name="out")])
    m.build((None, LENGTH))
    return m


def data():
    rng = np.random.default_rng(0)
    return rng.integers(0, VOCAB, size=(64, LENGTH)), rng.integers(0, 4, size=64)


def fit(opt, seed=3):
    m = model(seed)
    m.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = data()
    hist = m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    return m, hist.history["loss"]


def graddrop(**kw):
    base = dict(mode="graddrop", drop_warmup_steps=0)
    base.update(kw)
    return CommSettings(**base)


def test_zero_drop_ratio_trains_exactly_like_the_plain_optimizer():
    ref, _ = fit(keras.optimizers.legacy.Adam(0.01))
    got, _ = fit(wrap_optimizer(keras.optimizers.legacy.Adam(0.01), graddrop(drop_ratio=0.0), SINGLE))
    for a, b in zip(ref.get_weights(), got.get_weights()):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_graddrop_trains_keeps_residual_slots_and_the_schedule():
    schedule = build_schedule("warmup_inverse_sqrt", peak_lr=0.05, warmup_steps=4)
    base = keras.optimizers.legacy.Adam(schedule)
    opt = wrap_optimizer(base, graddrop(drop_ratio=0.9), SINGLE)
    assert isinstance(opt, type(base)) and opt.learning_rate is schedule
    m, losses = fit(opt)
    assert losses[-1] < losses[0]
    residuals = [opt.get_slot(v, RESIDUAL_SLOT) for v in m.trainable_variables]
    assert any(np.abs(r.numpy()).max() > 0 for r in residuals)
    stats = exchange_of(opt).step_stats()
    assert 0 < stats["density"] < 0.2 and stats["sent_bytes"] < stats["dense_bytes"] / 5
    # residuals are optimizer slots, so they are checkpointed with the optimizer
    names = [v.name for v in opt.variables()]
    assert sum(RESIDUAL_SLOT in n for n in names) == len(m.trainable_variables)


def test_no_residual_slots_without_error_feedback():
    opt = wrap_optimizer(keras.optimizers.legacy.SGD(0.1), graddrop(error_feedback=False), SINGLE)
    fit(opt)
    assert not any(RESIDUAL_SLOT in v.name for v in opt.variables())


def test_local_modes_keep_the_optimizer_and_horovod_modes_wrap_nothing_in_one_process():
    opt = keras.optimizers.legacy.SGD(0.1)
    for mode in ("fedavg", "bmuf", "dense", "sparse_as_dense"):
        assert wrap_optimizer(opt, CommSettings(mode=mode), SINGLE) is opt


def test_checkpoint_restores_residuals(tmp_path):
    opt = wrap_optimizer(keras.optimizers.legacy.SGD(0.1), graddrop(drop_ratio=0.9), SINGLE)
    m, _ = fit(opt)
    before = [opt.get_slot(v, RESIDUAL_SLOT).numpy() for v in m.trainable_variables]
    path = tf.train.Checkpoint(model=m, optimizer=opt).save(str(tmp_path / "ckpt"))
    opt2 = wrap_optimizer(keras.optimizers.legacy.SGD(0.1), graddrop(drop_ratio=0.9), SINGLE)
    m2 = model(seed=9)
    m2.compile(optimizer=opt2, loss="mse")
    tf.train.Checkpoint(model=m2, optimizer=opt2).restore(path)
    opt2._create_all_weights(m2.trainable_variables)
    after = [opt2.get_slot(v, RESIDUAL_SLOT).numpy() for v in m2.trainable_variables]
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)
