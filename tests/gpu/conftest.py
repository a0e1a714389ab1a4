"""GPU tests: collected everywhere, skipped at module level where TensorFlow sees no GPU.

Every module here starts with ``from tests.gpu.conftest import require_gpu; require_gpu()``, so
on a CPU-only machine (CI) the whole directory reports as skipped without running any op.
"""
import pytest

from tf_nmt.compat import tf


def require_gpu() -> None:
    """Skips the calling module unless TensorFlow sees a GPU."""
    if not tf.config.list_physical_devices("GPU"):
        pytest.skip("no GPU visible to TensorFlow (tests/gpu runs through the device tool)",
                    allow_module_level=True)
