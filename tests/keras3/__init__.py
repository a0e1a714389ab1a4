"""Child-process workers for the Keras 3 tests (tf-nmt's models built with ``TF_NMT_KERAS=3``)."""
