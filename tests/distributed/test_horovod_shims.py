"""Our Horovod shims with a real (single-process) Horovod; skipped when Horovod is missing.

Runs in child processes so Horovod/MPI never load into the pytest process, with
TF_USE_LEGACY_KERAS unset (``tf.keras`` is Keras 3, as in a user's process).
"""
import importlib.util
import subprocess
import sys
import textwrap

import pytest

from horovod_patches.mpi_env import launch_env

pytestmark = pytest.mark.skipif(importlib.util.find_spec("horovod") is None,
                                reason="horovod not installed (scripts/install_horovod.sh)")

CHILD = textwrap.dedent("""
    import keras as keras3
    import tf_keras
    from tf_nmt import distributed
    from tf_nmt.compat import keras, tf
    from tf_nmt.distributed import comm
    from horovod_patches.keras import (distributed_optimizer, import_horovod_keras,
                                       import_horovod_keras_elastic)

    ctx = distributed.init(enabled=True)
    assert (ctx.rank, ctx.size, ctx.distributed) == (0, 1, False), ctx

    hvd_keras = import_horovod_keras()
    assert hvd_keras.callbacks.K is tf_keras.backend and hvd_keras.K is tf_keras.backend
    # Horovod's Keras classes are tf_keras's; the process's tf.keras is still Keras 3
    assert issubclass(hvd_keras.callbacks.BroadcastGlobalVariablesCallback,
                      tf_keras.callbacks.Callback)
    assert tf.keras.Model is keras3.Model and tf.keras.__version__.startswith("3."), tf.keras
    elastic = import_horovod_keras_elastic()
    assert issubclass(elastic.CommitStateCallback, tf_keras.callbacks.Callback)
    tiny = keras.Sequential([keras.layers.Dense(1)])
    tiny.build((None, 2))
    state = elastic.KerasState(tiny, optimizer=keras.optimizers.legacy.SGD(0.1))
    assert state.backend.get_value is tf_keras.backend.get_value, state.backend  # not Keras 3's
    assert tf.keras.Model is keras3.Model

    class Halving(keras.optimizers.schedules.LearningRateSchedule):  # deliberately unregistered
        def __init__(self, lr):
            self.lr = lr
        def __call__(self, step):
            return self.lr / tf.cast(step + 1, tf.float32)
        def get_config(self):
            return {"lr": self.lr}

    schedule = Halving(0.5)
    wrapped = distributed_optimizer(keras.optimizers.Adam(schedule), sparse_as_dense=True)
    assert wrapped._learning_rate is schedule
    assert isinstance(wrapped, tf_keras.optimizers.Adam)
    legacy = distributed_optimizer(keras.optimizers.legacy.Adam(schedule))
    assert legacy._get_hyper("learning_rate") is schedule
    assert isinstance(legacy, tf_keras.optimizers.legacy.Adam)

    # size 1: no wrapping; accumulation over 2 passes goes through Horovod's helper
    plain = keras.optimizers.SGD(0.1)
    assert comm.wrap_optimizer(plain, comm.CommSettings(), ctx) is plain
    acc = comm.wrap_optimizer(keras.optimizers.SGD(1.0), comm.CommSettings(), ctx,
                              backward_passes_per_step=2)
    v = tf.Variable([0.0])
    seen = []
    for g in (1.0, 3.0):  # aggregation happens in compute_gradients (minimize), not apply
        with tf.GradientTape() as tape:
            loss = g * tf.reduce_sum(v)
        acc.minimize(loss, [v], tape=tape)
        seen.append(float(v.numpy()[0]))
    assert seen == [0.0, -2.0], seen  # one update, with the mean of the two gradients
    # Horovod counts backward passes, not updates, in `iterations` (trainers must know)
    assert int(acc.iterations.numpy()) == 2, int(acc.iterations.numpy())

    try:
        distributed_optimizer(object())
    except TypeError as err:
        assert "tf_keras" in str(err)
    else:
        raise AssertionError("non-tf_keras optimizer accepted")
    print("OK")
""")


# A process that imported horovod.tensorflow.keras itself (with Keras 3): refused in one line.
REFUSED = textwrap.dedent("""
    import horovod.tensorflow.keras
    from horovod_patches.keras import import_horovod_keras
    try:
        import_horovod_keras()
    except RuntimeError as err:
        assert "\\n" not in str(err), str(err)
        print("REFUSED " + str(err))
    """)


def keras3_env() -> dict:
    """The launch environment without TF_USE_LEGACY_KERAS: ``tf.keras`` is Keras 3."""
    return {k: v for k, v in launch_env().items() if k != "TF_USE_LEGACY_KERAS"}


def test_shims_with_real_horovod():
    # tf-nmt's models on Keras 2 (the shims bind Horovod's Keras to tf_keras); tf.keras is Keras 3
    proc = subprocess.run([sys.executable, "-c", CHILD], env=dict(keras3_env(), TF_NMT_KERAS="2"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), proc.stderr[-3000:]


def test_horovod_keras_imported_with_keras3_is_refused():
    proc = subprocess.run([sys.executable, "-c", REFUSED], env=keras3_env(), capture_output=True,
                          text=True, timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("REFUSED ")]
    assert proc.returncode == 0 and len(lines) == 1, proc.stdout + proc.stderr[-3000:]
    assert "before importing horovod.tensorflow.keras" in lines[0]
    assert "horovod_patches.keras3" in lines[0]
