"""horovod_patches.keras3.elastic.KerasState's fingerprints in one process (Horovod size 1,
Keras 3): each sync records one, over the weights and the optimizer variables (issue 56 item 7).

Runs in a child process with TF_USE_LEGACY_KERAS unset, so neither Horovod nor Keras 3 load into
the pytest process. Agreement across ranks after a real recovery is tested under an elastic
horovodrun in tests/parallel/test_elastic.py.
"""
import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.distributed.test_horovod_shims import keras3_env

pytestmark = pytest.mark.skipif(importlib.util.find_spec("horovod") is None,
                                reason="horovod not installed (scripts/install_horovod.sh)")

CHILD = textwrap.dedent("""
    import keras
    import horovod.tensorflow as hvd
    from horovod_patches import fingerprint as fingerprints
    from horovod_patches.keras3.elastic import KerasState

    hvd.init()
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse", jit_compile=False)
    model.optimizer.build(model.trainable_variables)
    silent = KerasState(model, epoch=0)
    silent.sync()                                     # no fingerprint_dir: nothing recorded
    state = KerasState(model, fingerprint_dir=DIR, epoch=0)
    state.sync()
    first = state.fingerprint()
    model.optimizer.variables[-1].assign_add(keras.ops.ones_like(model.optimizer.variables[-1]))
    after_slot = state.fingerprint()                  # an optimizer slot is part of it
    model.weights[0].assign_add(keras.ops.ones_like(model.weights[0]))
    after_weight = state.fingerprint()
    model.optimizer.iterations.assign(7)
    state.record_fingerprint("end", epoch=1)
    entries = fingerprints.read_entries(DIR)
    assert [(e["event"], e["step"], e["rank"], e["world_size"]) for e in entries] == [
        ("sync", 0, 0, 1), ("end", 7, 0, 1)], entries
    assert entries[0]["fingerprint"] == first and entries[1]["epoch"] == 1
    assert len({first, after_slot, after_weight, entries[1]["fingerprint"]}) == 4
    assert fingerprints.disagreements(entries) == []
    print("OK")
""")


def test_keras3_state_records_a_fingerprint_at_each_sync(tmp_path):
    proc = subprocess.run([sys.executable, "-c", f"DIR = {str(tmp_path / 'fp')!r}\n" + CHILD],
                          env=keras3_env(), capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout.strip().endswith("OK"), proc.stdout[-2000:] + proc.stderr[-3000:]
