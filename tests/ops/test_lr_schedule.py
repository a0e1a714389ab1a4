"""The NmtLearningRate op agrees with the Python schedules and the plain formula."""
import numpy as np
import pytest

import tf_nmt  # noqa: F401
from tests.ops.reference import lr_schedule_value
from tf_nmt.compat import keras, tf
from tf_nmt.ops.loader import load_ops
from tf_nmt.training import schedules

STEPS = [0, 1, 2, 99, 100, 101, 3999, 4000, 4001, 10**6, 2**31 - 1]


@pytest.mark.parametrize("name", sorted(schedules.SCHEDULES["op"]))
@pytest.mark.parametrize("warmup", [1, 100, 4000])
def test_op_matches_python(name, warmup):
    params = {"peak_lr": 7e-4, "warmup_steps": warmup}
    op = schedules.build_schedule(name, implementation="op", **params)
    py = schedules.build_schedule(name, implementation="python", **params)
    for step in STEPS:
        for dtype in (tf.int32, tf.int64, tf.float32):
            got = float(op(tf.constant(step, dtype)))
            assert got == float(py(tf.constant(step, dtype)))
        np.testing.assert_allclose(got, lr_schedule_value(name, step, **params), rtol=1e-6)


def test_in_optimizer_and_config_roundtrip():
    sched = schedules.build_schedule("warmup_inverse_sqrt", implementation="op", peak_lr=1e-3,
                                     warmup_steps=10)
    opt = keras.optimizers.Adam(learning_rate=sched)
    var = tf.Variable(1.0)
    opt.apply_gradients([(tf.constant(1.0), var)])
    assert type(sched)(**sched.get_config()).get_config() == sched.get_config()
    fn = tf.function(lambda s: sched(s))
    assert float(fn(tf.constant(9, tf.int64))) == pytest.approx(1e-3)


def test_bad_params_raise():
    with pytest.raises(ValueError):
        schedules.build_schedule("inverse_sqrt", implementation="op", peak_lr=1.0, warmup_steps=0)
    with pytest.raises(tf.errors.InvalidArgumentError):
        load_ops().nmt_learning_rate(tf.constant(1), schedule="inverse_sqrt", peak_lr=1.0, warmup_steps=0.5)
    with pytest.raises(tf.errors.InvalidArgumentError):
        load_ops().nmt_learning_rate(tf.constant([1, 2]), schedule="inverse_sqrt", peak_lr=1.0, warmup_steps=2.0)
