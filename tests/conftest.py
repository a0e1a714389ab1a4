"""Shared pytest set-up: quiet TF, and the ``slow``/``parallel`` markers.

TF_USE_LEGACY_KERAS is not set: the suite runs as users do (``tf.keras`` is Keras 3, tf-nmt's
models are tf_keras objects).
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
