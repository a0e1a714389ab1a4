"""The block/uint16 index code, packed sign bits and byte accounting, against NumPy."""
import numpy as np
import pytest

from tf_nmt.compat import tf
from tf_nmt.distributed.comm import index_codec


@pytest.mark.parametrize("total, n", [(10, 3), (70000, 50), (300000, 2000), (5, 0)])
def test_index_code_round_trips(total, n):
    rng = np.random.default_rng(total + n)
    idx = np.sort(rng.choice(total, size=n, replace=False)).astype(np.int64)
    low, counts = index_codec.encode_indices(tf.constant(idx, tf.int64), total)
    assert low.dtype == tf.uint16 and counts.dtype == tf.int32
    assert int(tf.size(counts)) == index_codec.num_blocks(total) == max(1, -(-total // 65536))
    np.testing.assert_array_equal(index_codec.decode_indices(low, counts, total).numpy(), idx)


def test_index_code_of_several_ranks_concatenated():
    total = 200000
    a = np.array([1, 65535, 65536, 199999], np.int64)
    b = np.array([0, 7, 140000], np.int64)
    la, ca = index_codec.encode_indices(tf.constant(a), total)
    lb, cb = index_codec.encode_indices(tf.constant(b), total)
    got = index_codec.decode_indices(tf.concat([la, lb], 0), tf.concat([ca, cb], 0), total).numpy()
    np.testing.assert_array_equal(got, np.concatenate([a, b]))


@pytest.mark.parametrize("n", [0, 1, 8, 13])
def test_sign_bits_round_trip(n):
    signs = np.random.default_rng(n).random(n) > 0.5
    packed = index_codec.pack_signs(tf.constant(signs))
    assert packed.dtype == tf.uint8 and int(tf.size(packed)) == -(-n // 8)
    np.testing.assert_array_equal(index_codec.unpack_signs(packed).numpy()[:n], signs)

