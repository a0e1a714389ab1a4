"""tf-nmt: fast, distributed neural machine translation on TensorFlow/Keras 2.

Importing the package selects Keras 2 (``tf_keras``) for ``tf.keras``: Horovod's Keras
integration silently stops averaging gradients under Keras 3, so Keras 3 is never used.
"""
import os as _os

_os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"
