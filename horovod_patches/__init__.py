"""tf-nmt's own compatibility shims for Horovod 0.28.1 on TensorFlow 2.20+/Keras 2 (tf_keras).

* ``build_shim/`` — header shim used only while compiling Horovod (see scripts/install_horovod.sh).
* :mod:`horovod_patches.keras` — imports ``horovod.tensorflow.keras`` bound to tf_keras.
* :mod:`horovod_patches.keras3` — our own Horovod integration for Keras 3 (``import keras``):
  DistributedOptimizer and callbacks on ``horovod.tensorflow`` collectives (docs/keras3.md);
  separate from tf-nmt, which stays on Keras 2.
* :mod:`horovod_patches.mpi_env` — environment for Open MPI when running as root (containers).

Importing this package does not import Horovod or TensorFlow.
"""
