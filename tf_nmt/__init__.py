"""tf-nmt: fast, distributed neural machine translation on TensorFlow, with Keras 3 or 2 models.

tf-nmt's models are Keras 3 objects by default, or Keras 2 (``tf_keras``) ones with
``TF_NMT_KERAS=2`` (:mod:`tf_nmt.compat` imports the chosen one). Importing the package does not
choose the process's Keras: ``tf.keras`` and ``import keras`` stay what they are (Keras 3 by
default), so a Keras 3 script can import tf_nmt.

The facts of tf-nmt's own choice live here, without TensorFlow, so that the command line can
settle it before :mod:`tf_nmt.compat` runs (:mod:`tf_nmt.commands.keras`).
"""
import os as _os
from typing import Any as _Any, Mapping as _Mapping, Optional as _Optional

_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"

#: The environment variable that picks the Keras of tf-nmt's models (``horovodrun`` ranks inherit it).
KERAS_ENV_VAR = "TF_NMT_KERAS"
KERAS_CHOICES = ("2", "3")
#: Keras 3 (``import keras``, TensorFlow backend) unless the user asks for Keras 2 (``tf_keras``).
KERAS_DEFAULT = "3"
#: What a run's ``meta.json`` without a ``keras`` key was trained on: tf-nmt's models were Keras 2
#: objects before the version was recorded.
UNRECORDED_RUN_KERAS = 2


def keras_requested() -> _Optional[str]:
    """The version the environment asks for (``TF_NMT_KERAS``), or None when unset or empty."""
    return _os.environ.get(KERAS_ENV_VAR, "").strip() or None


def keras_version() -> str:
    """The version this process builds tf-nmt's models on: the environment's, else the default."""
    return keras_requested() or KERAS_DEFAULT


def recorded_keras(meta: _Optional[_Mapping[str, _Any]]) -> int:
    """The Keras major version a run's ``meta.json`` records (2 for runs from before it did)."""
    return int((meta or {}).get("keras", UNRECORDED_RUN_KERAS))
