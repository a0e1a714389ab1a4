"""The one place that imports TensorFlow and Keras 2 for the whole package.

Always use ``from tf_nmt.compat import tf, keras``; never ``import keras`` (that is Keras 3).
"""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

if os.environ.get("TF_USE_LEGACY_KERAS") not in ("1", "true", "True"):
    raise RuntimeError(
        "tf-nmt needs Keras 2: set TF_USE_LEGACY_KERAS=1 before TensorFlow is imported "
        "(import tf_nmt first)."
    )

__all__ = ["tf", "keras"]
