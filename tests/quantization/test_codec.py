"""Stock-op and NumPy decoders are bit-exact with the custom decode kernels and the reference."""
import numpy as np
import pytest

import tf_nmt  # noqa: F401
from tests.ops import reference as ref
from tf_nmt import ops
from tf_nmt.quantization.codec import decode_np, decode_tf

QUANTIZERS = {"log": ops.LOG, "fixed": ops.FIXED}


@pytest.mark.parametrize("kind", ["log", "fixed"])
@pytest.mark.parametrize("bits", range(1, 9))
def test_decoders_match_the_op(kind, bits):
    codes = np.arange(1 << bits, dtype=np.uint8)
    for scale in (0.0, 1e-38, 3e-30, 0.37, 1.0, 5.5, 2.0 ** 100):
        expected = QUANTIZERS[kind].decode(codes, scale, bits).numpy()
        np.testing.assert_array_equal(decode_tf(codes, scale, bits, kind).numpy(), expected)
        np.testing.assert_array_equal(decode_np(codes, scale, bits, kind), expected)
        np.testing.assert_array_equal(expected, ref.decode(kind, codes, scale, bits))


def test_unknown_kind():
    with pytest.raises(ValueError, match="kind"):
        decode_np(np.zeros(1, np.uint8), 1.0, 4, "linear")
