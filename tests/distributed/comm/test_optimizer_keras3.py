"""The gradient-exchanging optimizer on Keras 3, in one process (the allgather is local).

Runs in a child process with ``TF_NMT_KERAS=3``, so Keras 3 never becomes tf-nmt's Keras in the
pytest process. The two ranks' exchange, and its agreement with Keras 2, are tested under a real
horovodrun in tests/parallel/test_graddrop_keras3.py.
"""
import os
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import numpy as np
    from tf_nmt.compat import KERAS3, keras, tf
    from tf_nmt.distributed import SINGLE
    from tf_nmt.distributed.comm import CommSettings, wrap_optimizer
    from tf_nmt.distributed.comm.optimizer import (RESIDUAL_SLOT, exchange_of,
                                                   residual_variables)
    from tf_nmt.training.schedules import build_schedule

    assert KERAS3
    VOCAB, LENGTH = 50, 6

    def model(seed=3):
        keras.utils.set_random_seed(seed)
        m = keras.Sequential([keras.Input((LENGTH,), dtype="int32"),
                              keras.layers.Embedding(VOCAB, 8, name="embedding"),
                              keras.layers.GlobalAveragePooling1D(),
                              keras.layers.Dense(4, name="out")])
        return m

    def fit(opt, seed=3):
        m = model(seed)
        m.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=False)
        rng = np.random.default_rng(0)
        x, y = rng.integers(0, VOCAB, size=(64, LENGTH)), rng.integers(0, 4, size=64)
        hist = m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        return m, hist.history["loss"]

    def graddrop(**kw):
        return CommSettings(**{"mode": "graddrop", "drop_warmup_steps": 0, **kw})

    class DenseAdam(keras.optimizers.Adam):  # Keras 3's Adam updates IndexedSlices lazily
        def apply(self, grads, trainable_variables=None):
            return super().apply([tf.convert_to_tensor(g) for g in grads], trainable_variables)

    # R = 0 keeps everything: exactly the plain optimizer on the (densified) gradients
    ref, _ = fit(DenseAdam(0.01))
    got, _ = fit(wrap_optimizer(keras.optimizers.Adam(0.01), graddrop(drop_ratio=0.0), SINGLE))
    for a, b in zip(ref.get_weights(), got.get_weights()):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)

    # R = 0.9: trains, keeps the schedule object, residuals are optimizer variables
    schedule = build_schedule("warmup_inverse_sqrt", peak_lr=0.05, warmup_steps=4)
    base = keras.optimizers.Adam(schedule)
    opt = wrap_optimizer(base, graddrop(drop_ratio=0.9), SINGLE)
    assert isinstance(opt, type(base)) and opt._learning_rate is schedule
    m, losses = fit(opt)
    assert losses[-1] < losses[0], losses
    assert int(opt.iterations.numpy()) == 16
    residuals = residual_variables(opt, m.trainable_variables)
    assert len(residuals) == len(m.trainable_variables)
    assert all(r.shape == v.shape for r, v in zip(residuals, m.trainable_variables))
    assert any(np.abs(r.numpy()).max() > 0 for r in residuals)
    assert sum(RESIDUAL_SLOT in v.path for v in opt.variables) == len(m.trainable_variables)
    stats = exchange_of(opt).step_stats()
    assert 0 < stats["density"] < 0.2 and stats["sent_bytes"] < stats["dense_bytes"] / 5, stats
    assert exchange_of(opt).names == [v.path for v in m.trainable_variables]
    # the statistics find the exchange inside a loss-scale optimizer (mixed float16) too
    scaled = keras.optimizers.LossScaleOptimizer(
        wrap_optimizer(keras.optimizers.SGD(0.1), graddrop(drop_ratio=0.9), SINGLE))
    fit(scaled)
    assert exchange_of(scaled) is exchange_of(scaled.inner_optimizer) is not None
    assert exchange_of(keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))) is None

    # elastic training keeps them with their process: a sync broadcasts all but these
    from tf_nmt.training.elastic import per_rank_variables
    assert per_rank_variables(m) == {id(r) for r in residuals}

    # the residuals are checkpointed with the optimizer and restored into a fresh one
    before = [r.numpy() for r in residuals]
    path = tf.train.Checkpoint(model=m, optimizer=opt).save(CKPT)
    opt2 = wrap_optimizer(keras.optimizers.Adam(schedule), graddrop(drop_ratio=0.9), SINGLE)
    m2 = model(seed=9)
    opt2.build(m2.trainable_variables)
    tf.train.Checkpoint(model=m2, optimizer=opt2).restore(path).assert_consumed()
    after = [r.numpy() for r in residual_variables(opt2, m2.trainable_variables)]
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)

    # no residuals without error feedback
    plain = wrap_optimizer(keras.optimizers.SGD(0.1), graddrop(error_feedback=False), SINGLE)
    fit(plain)
    assert residual_variables(plain, plain._trainable_variables) == []
    assert not any(RESIDUAL_SLOT in v.path for v in plain.variables)

    # refused: a tf_keras optimizer, a used one, Keras 3's own accumulation
    import tf_keras
    used = keras.optimizers.SGD(0.1)
    used.build(model().trainable_variables)
    for make, error in ((lambda: tf_keras.optimizers.legacy.SGD(0.1), TypeError),
                        (lambda: used, ValueError),
                        (lambda: keras.optimizers.SGD(0.1, gradient_accumulation_steps=2),
                         ValueError)):
        try:
            wrap_optimizer(make(), graddrop(), SINGLE)
        except error:
            continue
        raise AssertionError("not refused")
    print("OK")
""")


def test_graddrop_optimizer_on_keras3(tmp_path):
    env = dict(os.environ, TF_NMT_KERAS="3", TF_CPP_MIN_LOG_LEVEL="2", OMP_NUM_THREADS="1")
    env.pop("TF_USE_LEGACY_KERAS", None)
    code = f"CKPT = {str(tmp_path / 'ckpt')!r}\n" + CHILD
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), proc.stderr[-3000:]
