"""The one place that imports TensorFlow and chooses the Keras that tf-nmt's models are built on.

tf-nmt serves both Keras versions from one code base (a compatibility layer, not a fork): its
layers and models use only the API the two share, through ``from tf_nmt.compat import tf, keras``
(never ``tf.keras`` or ``import keras`` directly). Which one a process uses is chosen once, before
the first import of tf-nmt's models, by the environment variable ``TF_NMT_KERAS``
(the package ``__init__`` holds the facts of the choice, without TensorFlow):

* ``3`` (default): Keras 3 (``import keras``, TensorFlow backend), so that tf-nmt's layers and
  models go into a user's Keras 3 model and train with Keras 3's ``model.fit``;
* ``2``: Keras 2, the ``tf_keras`` package, whatever ``tf.keras`` is in the process (runs
  trained before Keras 3 became the default, and ``train-async``).

Nothing here sets an environment variable: ``tf.keras`` and ``import keras`` stay what the user's
process made them. Processes started by ``horovodrun`` inherit the variable.
"""
import tensorflow as tf

from tf_nmt import KERAS_CHOICES, KERAS_ENV_VAR as ENV_VAR, keras_version

KERAS_VERSION = keras_version()
if KERAS_VERSION not in KERAS_CHOICES:
    raise ImportError(f"{ENV_VAR}={KERAS_VERSION!r}: expected 3 (Keras 3, the default) or 2 "
                      "(tf_keras)")
KERAS_VERSION = int(KERAS_VERSION)

if KERAS_VERSION == 3:
    import keras
    if not keras.__version__.startswith("3.") or keras.backend.backend() != "tensorflow":
        raise ImportError(f"{ENV_VAR}=3 needs Keras 3 with the TensorFlow backend, got keras "
                          f"{keras.__version__} on {keras.backend.backend()!r} (KERAS_BACKEND)")
else:
    import tf_keras as keras

KERAS3 = KERAS_VERSION == 3


def keras_name() -> str:
    """``"keras 3.x.y"`` or ``"tf_keras 2.x.y"``, for reports (the Keras 3 test workers record it;
    a run's meta.json records ``KERAS_VERSION``)."""
    return f"{'keras' if KERAS3 else 'tf_keras'} {keras.__version__}"


def variable_name(variable) -> str:
    """A variable's full name without the ``:0`` suffix, the same in both Keras versions
    (``transformer/encoder_0/attention/qkv/kernel``): Keras 3 keeps it as ``path``."""
    name = variable.path if KERAS3 else variable.name
    return name[:-2] if name.endswith(":0") else name


def tf_variable(variable) -> "tf.Variable":
    """The ``tf.Variable`` behind a model variable: Keras 2's is one, Keras 3's holds one
    (``.value``), which is what a traced graph captures."""
    return variable if isinstance(variable, tf.Variable) else variable.value


def all_layers(model) -> list:
    """``model`` and every layer inside it, recursively (Keras 3 has no ``submodules``)."""
    return list(model._flatten_layers(include_self=True, recursive=True))  # noqa: SLF001


__all__ = ["tf", "keras", "KERAS3", "KERAS_VERSION", "ENV_VAR", "keras_name", "variable_name",
           "tf_variable", "all_layers"]
