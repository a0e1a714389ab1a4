"""Shared pytest set-up: Keras 2 everywhere, quiet TF, and the ``slow``/``parallel`` markers."""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
