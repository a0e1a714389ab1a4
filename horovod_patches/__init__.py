"""tf-nmt's own compatibility shims for Horovod 0.28.1 on TensorFlow 2.20+, for Keras 3
(tf-nmt's default) and Keras 2 (tf_keras, ``TF_NMT_KERAS=2``).

* ``build_shim/`` — header shim used only while compiling Horovod (see scripts/install_horovod.sh).
* :mod:`horovod_patches.keras` — imports ``horovod.tensorflow.keras`` bound to tf_keras (what
  tf-nmt's trainer wraps its optimizer with on Keras 2).
* :mod:`horovod_patches.keras3` — our own Horovod integration for Keras 3 (``import keras``):
  optimizer wrappers and callbacks on ``horovod.tensorflow`` collectives (docs/keras.md); tf-nmt's
  trainer uses it when its models build on Keras 3.
* :mod:`horovod_patches.mpi_env` — environment for Open MPI when running as root (containers);
  the experiments' launcher (``experiments/lib/launcher.py``) and the tests' pass it to ranks.

Importing this package does not import Horovod or TensorFlow.
"""
