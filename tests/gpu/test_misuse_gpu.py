"""Misuse raises InvalidArgumentError on the GPU too (the CPU kernels' errors, tests/ops/test_misuse.py),
including errors only the device can see (decode codes, nibbles, OneBit indices), eagerly and
inside tf.function; and the op stays usable afterwards."""
import numpy as np
import pytest

from tests.gpu.conftest import require_gpu

require_gpu()

import tf_nmt  # noqa: E402,F401
from tf_nmt import ops  # noqa: E402
from tf_nmt.compat import tf  # noqa: E402

pytestmark = pytest.mark.gpu

G = np.ones((4, 5), np.float32)
X = np.linspace(-1, 1, 20).astype(np.float32)

CASES = {
    "shape_mismatch": lambda: ops.grad_drop(tf.constant(G), tf.ones((5, 4)), 0.9),
    "ratio_one": lambda: ops.grad_drop(G, G, 1.0),
    "ratio_nan": lambda: ops.grad_drop(G, G, float("nan")),
    "fraction_zero": lambda: ops.grad_drop(G, G, 0.5, sample_fraction=0.0),
    "global_ratio": lambda: ops.grad_drop_global([G, G], [G, G], 1.5),
    "one_bit_index_range": lambda: ops.one_bit_quantize([0, 99], [1.0, 2.0], G),
    "one_bit_negative_index": lambda: ops.one_bit_quantize([-1], [1.0], G),
    "one_bit_lengths": lambda: ops.one_bit_quantize([0, 1], [1.0], G),
    "bits_zero": lambda: ops.log_quantize(X, 0),
    "bits_tensor": lambda: ops.FIXED.quantize(X, tf.constant(12)),
    "scale_negative": lambda: ops.LOG.encode(X, -1.0, 4),
    "scale_nan": lambda: ops.FIXED.encode(X, float("nan"), 4),
    "decode_code_too_big": lambda: ops.LOG.decode(np.array([16], np.uint8), 1.0, 4),
    "decode_code_too_big_late": lambda: ops.FIXED.decode(np.r_[np.zeros(100_000, np.uint8), 200].astype(np.uint8), 1.0, 7),
    "pack_big_code": lambda: ops.pack_nibbles(np.array([3, 17], np.uint8)),
    "pack_big_code_vector_path": lambda: ops.pack_nibbles(np.r_[np.zeros(4096, np.uint8), 16].astype(np.uint8)),
    "unpack_size": lambda: ops.unpack_nibbles(np.array([1, 2], np.uint8), 7),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_misuse_raises_invalid_argument_on_gpu(case):
    with tf.device("/GPU:0"):
        with pytest.raises(tf.errors.InvalidArgumentError):
            CASES[case]()


def test_device_side_errors_inside_tf_function():
    with tf.device("/GPU:0"):
        decode = tf.function(lambda c: ops.LOG.decode(c, 1.0, 4))
        with pytest.raises(tf.errors.InvalidArgumentError, match="2\\^bits"):
            decode(tf.constant([1, 2, 99], tf.uint8))
        np.testing.assert_array_equal(decode(tf.constant([0, 8], tf.uint8)).numpy(), [1.0, -1.0])
        one_bit = tf.function(lambda i: ops.one_bit_quantize(i, tf.ones([2]), tf.zeros([3, 3])))
        with pytest.raises(tf.errors.InvalidArgumentError, match="out of range"):
            one_bit(tf.constant([0, 9], tf.int64))
        assert one_bit(tf.constant([0, 8], tf.int64))[0].shape == (2,)
