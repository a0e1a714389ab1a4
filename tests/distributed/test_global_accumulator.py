"""Server-side global accumulation (in-process; the real parameter-server run is in
test_async_sgd.py): one update per k pushes with the summed gradient, staleness accounting,
the artificial-staleness snapshot."""
import numpy as np
import pytest

from tf_nmt.compat import keras, tf
from tf_nmt.distributed.global_accumulator import MAX_TRACKED_STALENESS, GlobalAccumulator

# The parameter server's optimizers are Keras 2's: train-async runs on Keras 2 only.
pytestmark = pytest.mark.keras2_only


def pusher(acc):
    return tf.function(lambda grads, version: acc.push(grads, version))


def test_one_update_per_k_pushes_with_the_summed_gradient():
    w0 = np.array([1.0, -2.0, 0.5], np.float32)
    b0 = np.array([0.25], np.float32)
    w, b = tf.Variable(w0), tf.Variable(b0)
    acc = GlobalAccumulator([w, b], keras.optimizers.SGD(0.1), k=3)
    push = pusher(acc)
    rng = np.random.default_rng(0)
    grads = [(rng.normal(size=3).astype(np.float32), rng.normal(size=1).astype(np.float32))
             for _ in range(8)]
    ref_w, ref_b = w0.astype(np.float64), b0.astype(np.float64)
    window = []
    for i, (gw, gb) in enumerate(grads):
        out = push([tf.constant(gw), tf.constant(gb)], tf.constant(0, tf.int64))
        window.append((gw, gb))
        if (i + 1) % 3 == 0:  # the k-th push applies sum(window) once
            ref_w = ref_w - 0.1 * sum(g for g, _ in window)
            ref_b = ref_b - 0.1 * sum(g for _, g in window)
            window = []
        assert bool(out["applied"]) == ((i + 1) % 3 == 0)
        assert int(out["version"]) == (i + 1) // 3
        np.testing.assert_allclose(w.numpy(), ref_w, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(b.numpy(), ref_b, rtol=1e-6, atol=1e-6)
    assert int(acc.pushes.numpy()) == 8 and int(acc.version.numpy()) == 2
    assert int(acc.optimizer.iterations.numpy()) == 2
    np.testing.assert_allclose(acc.sums[0].numpy(), sum(g for g, _ in window), rtol=1e-6)


def test_adam_update_equals_one_adam_step_on_the_sum():
    v0 = np.array([0.3, -0.7], np.float32)
    v, ref = tf.Variable(v0), tf.Variable(v0)
    acc = GlobalAccumulator([v], keras.optimizers.Adam(0.01), k=2)
    push = pusher(acc)
    g1, g2 = np.array([1.0, 2.0], np.float32), np.array([-3.0, 0.5], np.float32)
    push([tf.constant(g1)], tf.constant(0, tf.int64))
    push([tf.constant(g2)], tf.constant(0, tf.int64))
    keras.optimizers.Adam(0.01).apply_gradients([(tf.constant(g1 + g2), ref)])
    np.testing.assert_allclose(v.numpy(), ref.numpy(), rtol=1e-6)


def test_learning_rate_schedule_follows_the_update_count():
    w = tf.Variable([0.0])
    schedule = keras.optimizers.schedules.ExponentialDecay(1.0, decay_steps=1, decay_rate=0.5)
    acc = GlobalAccumulator([w], keras.optimizers.SGD(schedule), k=2)
    push = pusher(acc)
    for _ in range(6):  # 3 updates of the summed gradient 2, at lr 1, 0.5, 0.25
        push([tf.constant([1.0])], tf.constant(0, tf.int64))
    np.testing.assert_allclose(w.numpy(), [-2.0 * (1.0 + 0.5 + 0.25)], rtol=1e-6)


def test_staleness_is_updates_between_pull_and_push():
    w = tf.Variable([0.0])
    acc = GlobalAccumulator([w], keras.optimizers.SGD(1.0), k=1)
    push = pusher(acc)
    one = [tf.constant([1.0])]
    pulled = []
    for _ in range(3):  # three workers pull version 0 ...
        pulled.append(acc.pull_version())
    seen = [int(push(one, version)["staleness"]) for version in pulled]  # ... then push in turn
    assert seen == [0, 1, 2]
    assert int(push(one, acc.pull_version())["staleness"]) == 0
    assert int(push(one, tf.constant(0, tf.int64))["staleness"]) == 4
    report = acc.staleness_report()
    assert report["pushes"] == 5 and report["updates"] == 5
    assert report["histogram"] == [2, 1, 1, 0, 1]
    assert report["mean"] == pytest.approx((0 + 1 + 2 + 0 + 4) / 5) and report["max"] == 4
    for _ in range(MAX_TRACKED_STALENESS + 5):
        push(one, acc.pull_version())
    push(one, tf.constant(0, tf.int64))  # far staler than the histogram tracks: last bucket
    report = acc.staleness_report()
    assert report["histogram"][-1] == 1 and report["max_is_lower_bound"]


def test_artificial_staleness_refreshes_the_snapshot_every_u_updates():
    w, snap = tf.Variable([0.0]), tf.Variable([123.0])
    acc = GlobalAccumulator([w], keras.optimizers.SGD(1.0), k=1, snapshot=[snap], refresh_every=3)
    np.testing.assert_array_equal(snap.numpy(), [0.0])  # starts as a copy of the parameters
    push = pusher(acc)
    staleness = []
    for step in range(1, 8):
        staleness.append(int(push([tf.constant([1.0])], acc.pull_version())["staleness"]))
        refreshed_at = step - step % 3
        np.testing.assert_array_equal(snap.numpy(), [-float(refreshed_at)])
        assert int(acc.pull_version()) == refreshed_at
    assert staleness == [0, 1, 2, 0, 1, 2, 0]
    assert acc.compute_variables() == [snap]


def test_invalid_settings_are_refused():
    w = tf.Variable([0.0])
    with pytest.raises(ValueError, match="k"):
        GlobalAccumulator([w], keras.optimizers.SGD(1.0), k=0)
    with pytest.raises(ValueError, match="snapshot"):
        GlobalAccumulator([w], keras.optimizers.SGD(1.0), refresh_every=2)
    acc = GlobalAccumulator([w], keras.optimizers.SGD(1.0))
    with pytest.raises(ValueError, match="pushed 2 gradients for 1 variables"):
        acc.push([tf.constant([1.0]), tf.constant([1.0])], tf.constant(0, tf.int64))
    with pytest.raises(ValueError, match="max_pushes"):
        GlobalAccumulator([w], keras.optimizers.SGD(1.0), max_pushes=-1)


def test_disabled_and_surplus_pushes_are_not_counted():
    w = tf.Variable([1.0, 2.0])
    acc = GlobalAccumulator([w], keras.optimizers.SGD(0.5), k=1, max_pushes=2)
    push = tf.function(lambda g, on: acc.push([g], tf.constant(0, tf.int64), enabled=on))
    g = tf.constant([1.0, -1.0])
    out = push(g, tf.constant(False))  # a Downpour step that only accumulates locally
    assert not bool(out["pushed"]) and not bool(out["applied"])
    assert int(acc.pushes.numpy()) == 0 and w.numpy().tolist() == [1.0, 2.0]
    assert [bool(push(g, tf.constant(True))["pushed"]) for _ in range(3)] == [True, True, False]
    assert int(acc.pushes.numpy()) == 2 and int(acc.version.numpy()) == 2
    np.testing.assert_allclose(w.numpy(), [0.0, 3.0])  # two updates, the third push dropped
    assert sum(acc.staleness_report()["histogram"]) == 2
