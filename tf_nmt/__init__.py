"""tf-nmt: fast, distributed neural machine translation on TensorFlow, with Keras 2 or 3 models.

tf-nmt's models are Keras 2 (``tf_keras``) objects by default, or Keras 3 ones with
``TF_NMT_KERAS=3`` (:mod:`tf_nmt.compat`, the one place that chooses). Importing the package does
not choose the process's Keras: ``tf.keras`` and ``import keras`` stay what they are (Keras 3 by
default), so a Keras 3 script can import tf_nmt.
"""
import os as _os

_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"
