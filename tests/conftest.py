"""Shared pytest set-up: quiet TF, and the Keras markers.

TF_USE_LEGACY_KERAS is not set: the suite runs as users do (``tf.keras`` is Keras 3). tf-nmt's
models are built on the Keras ``TF_NMT_KERAS`` picks (Keras 3 by default). CI runs the suite on
Keras 3, then the tests marked ``keras2`` again with ``TF_NMT_KERAS=2`` (``.ci/run``); a test
marked ``keras2_only`` exercises Keras 2's own API and runs in that pass only.
"""
import os

import pytest

import tf_nmt

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def pytest_collection_modifyitems(config, items):
    keras2 = tf_nmt.keras_version() == "2"
    for item in items:
        if item.get_closest_marker("keras2_only") is not None:
            item.add_marker(pytest.mark.keras2)
            if not keras2:
                item.add_marker(pytest.mark.skip(
                    reason="Keras 2's own API: runs in CI's Keras 2 pass (TF_NMT_KERAS=2)"))
