"""The one place that imports TensorFlow and Keras 2 for the whole package.

tf-nmt's layers and models are Keras 2 (``tf_keras``) objects, whichever Keras ``tf.keras`` is
in the process (Keras 3 on TensorFlow >= 2.16 unless the user set ``TF_USE_LEGACY_KERAS=1``):
always use ``from tf_nmt.compat import tf, keras``; never ``tf.keras`` or ``import keras``
(Keras 3 in a default process). Nothing here sets an environment variable.
"""
import tensorflow as tf
import tf_keras as keras

__all__ = ["tf", "keras"]
