"""horovod_patches.keras3 in one process (Horovod size 1, Keras 3); skipped without Horovod.

Runs in a child process with TF_USE_LEGACY_KERAS unset, so neither Horovod nor Keras 3 load
into the pytest process. The averaging itself is tested under a real horovodrun in
tests/parallel/test_keras3_horovod.py.
"""
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("horovod") is None,
                                reason="horovod not installed (scripts/install_horovod.sh)")

CHILD = textwrap.dedent("""
    import numpy as np, keras, tensorflow as tf, tf_keras
    import horovod.tensorflow as hvd
    from horovod_patches import keras3 as hk

    hvd.init()
    assert hvd.size() == 1
    refusals = [
        lambda: hk.DistributedOptimizer(tf_keras.optimizers.SGD(0.1)),          # Keras 2
        lambda: hk.DistributedOptimizer(keras.optimizers.SGD(0.1), backward_passes_per_step=0),
        lambda: hk.DistributedOptimizer(keras.optimizers.SGD(0.1, gradient_accumulation_steps=2),
                                        backward_passes_per_step=2),
        lambda: hk.DistributedOptimizer(hk.DistributedOptimizer(keras.optimizers.SGD(0.1))),
        lambda: hk.DistributedOptimizer(keras.optimizers.SGD(0.1), clipnorm=1.0),
        lambda: hk.LearningRateWarmup(0.1),
    ]
    for make in refusals:
        try:
            make()
        except (TypeError, ValueError):
            continue
        raise AssertionError("not refused")

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    opt = hk.DistributedOptimizer(keras.optimizers.Adam(0.01), backward_passes_per_step=3,
                                  compression=hvd.Compression.fp16)
    model.compile(optimizer=opt, loss="mse", jit_compile=False)
    x, y = np.ones((12, 3), "float32"), np.zeros((12, 2), "float32")
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=[hk.BroadcastInitialState()])
    assert int(opt.backward_passes) == 6 and int(opt.iterations) == 2, (opt.backward_passes,
                                                                        opt.iterations)
    opt.learning_rate = 0.5                       # delegated to the wrapped optimizer
    assert float(opt.inner_optimizer.learning_rate) == 0.5

    clone = hk.DistributedOptimizer.from_config(opt.get_config())
    assert clone.backward_passes_per_step == 3 and clone.compression is hvd.Compression.fp16
    assert type(clone.inner_optimizer) is keras.optimizers.Adam and not clone.count_passes

    # count_passes (what tf-nmt's trainer uses): iterations counts batches, as on Keras 2
    counted = hk.DistributedOptimizer(keras.optimizers.SGD(0.1), backward_passes_per_step=3,
                                      count_passes=True)
    other = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    other.compile(optimizer=counted, loss="mse", jit_compile=False)
    other.fit(x, y, batch_size=2, epochs=1, verbose=0)
    assert int(counted.backward_passes) == 6 and int(counted.iterations) == 6, counted.iterations
    assert hk.DistributedOptimizer.from_config(counted.get_config()).count_passes

    model.save(PATH)
    loaded = keras.models.load_model(PATH)
    assert isinstance(loaded.optimizer, hk.DistributedOptimizer)
    assert int(loaded.optimizer.iterations) == 2

    # tf-nmt's logged learning rate: the schedule of the innermost optimizer, at the step just
    # taken, through loss scaling around Horovod's wrapper (whose own rate is a 0.0 placeholder)
    import os
    os.environ["TF_NMT_KERAS"] = "3"
    from tf_nmt.training.callbacks import _current_lr
    sched = keras.optimizers.schedules.PiecewiseConstantDecay([1], [0.3, 0.7])
    inner = keras.optimizers.SGD(sched)
    nested = keras.optimizers.LossScaleOptimizer(hk.DistributedOptimizer(inner))
    inner.iterations.assign(3)
    assert abs(_current_lr(nested) - 0.7) < 1e-6, _current_lr(nested)
    print("OK")
""")


def test_keras3_package_single_process(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", OMP_NUM_THREADS="1")
    code = f"PATH = {str(tmp_path / 'm.keras')!r}\n" + CHILD
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=300, cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                              os.path.abspath(__file__)))))
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
