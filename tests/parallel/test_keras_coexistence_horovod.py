"""A Keras 3 script trains tf-nmt's Transformer under a real ``horovodrun -np 2`` (Gloo).

The ranks imported Keras 3 first, with TF_USE_LEGACY_KERAS unset (workers/keras_coexistence.py),
and build tf-nmt's models on Keras 2 (``TF_NMT_KERAS=2``, a run from before Keras 3 became
tf-nmt's default); tf-nmt's trainer still gets Horovod's Keras classes bound to tf_keras
(:mod:`horovod_patches.keras`), so the gradients are averaged and the ranks, each trained on its
own shard, end with bit-identical weights, while ``tf.keras`` stays Keras 3.
"""
import math

import numpy as np
import pytest

from tests.parallel import launch

pytestmark = [pytest.mark.parallel, pytest.mark.slow,
              pytest.mark.skipif(not launch.horovod_importable(), reason="horovod.tensorflow is "
                                 "not importable: build it with scripts/install_horovod.sh")]


def test_keras3_script_trains_tf_nmt_data_parallel(tmp_path):
    results = launch.horovodrun("keras_coexistence.py", tmp_path, controller="gloo", timeout=600,
                                env=launch.KERAS2)
    for res in results.values():
        assert res["size"] == 2 and res["final_step"] == 8, res
        assert res["keras"].startswith("3.") and res["tf_keras_version"].startswith("3."), res
        assert res["tf_keras_is_keras3"] and res["legacy_env"] is None, res
        assert res["nmt_model_is_tf_keras"] and res["horovod_callbacks_are_tf_keras"], res
        assert len(res["user_loss"]) == 3 and res["user_loss"][-1] < res["user_loss"][0], res
    chief_losses = results[0]["losses"]
    assert len(chief_losses) == 4 and all(math.isfinite(v) for v in chief_losses), chief_losses
    assert chief_losses[-1] < chief_losses[0], chief_losses  # it trained
    weights = {r: np.load(tmp_path / f"rank{r}.npz") for r in (0, 1)}
    names = sorted(weights[0].files, key=lambda n: int(n.split("_")[1]))
    assert names and names == sorted(weights[1].files, key=lambda n: int(n.split("_")[1]))
    for name in names:
        np.testing.assert_array_equal(weights[0][name], weights[1][name], err_msg=name)
