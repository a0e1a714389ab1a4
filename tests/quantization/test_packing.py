"""B-bit packing: round trip for every width, B=4 equals the PackNibbles op, the stock-TF
unpacker equals the NumPy one, and bad input is refused."""
import numpy as np
import pytest

import tf_nmt  # noqa: F401
from tf_nmt import ops
from tf_nmt.quantization.packing import pack_codes, packed_size, unpack_codes, unpack_codes_tf

RNG = np.random.default_rng(5)


@pytest.mark.parametrize("bits", range(1, 9))
@pytest.mark.parametrize("count", [0, 1, 7, 8, 9, 1001])
def test_round_trip(bits, count):
    codes = RNG.integers(0, 1 << bits, count).astype(np.uint8)
    packed = pack_codes(codes, bits)
    assert packed.dtype == np.uint8 and packed.size == packed_size(count, bits) == -(-count * bits // 8)
    np.testing.assert_array_equal(unpack_codes(packed, count, bits), codes)
    np.testing.assert_array_equal(unpack_codes_tf(packed, count, bits).numpy(), codes)


def test_reference_bit_layout():
    # little-endian stream: code i at bits [i*B, (i+1)*B)
    assert pack_codes(np.array([1, 2, 3], np.uint8), 3).tolist() == [1 | 2 << 3 | (3 & 3) << 6, 3 >> 2]
    assert pack_codes(np.array([0xA, 0x5, 0xF], np.uint8), 4).tolist() == [0x5A, 0x0F]


def _stream_pack(codes: np.ndarray, bits: int) -> np.ndarray:
    """The layout's definition as a NumPy bit stream (independent of the packing module)."""
    stream = np.unpackbits(codes[:, None], axis=1, bitorder="little")[:, :bits]
    return np.packbits(stream.ravel(), bitorder="little")


@pytest.mark.parametrize("count", [0, 1, 2, 999, 100_001])
def test_four_bits_runs_in_the_pack_nibbles_op_and_matches_the_layout(count, monkeypatch):
    import tf_nmt.quantization.packing as packing

    calls = []
    for name in ("pack_nibbles", "unpack_nibbles"):
        op = getattr(packing, name)
        monkeypatch.setattr(packing, name, lambda *a, _op=op, _n=name: calls.append(_n) or _op(*a))
    codes = RNG.integers(0, 16, count).astype(np.uint8)
    packed = pack_codes(codes, 4)
    np.testing.assert_array_equal(packed, _stream_pack(codes, 4))
    np.testing.assert_array_equal(unpack_codes(packed, count, 4), codes)
    assert calls == ["pack_nibbles", "unpack_nibbles"]
    np.testing.assert_array_equal(ops.unpack_nibbles(packed, count).numpy(), codes)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="fit in 3 bits"):
        pack_codes(np.array([8], np.uint8), 3)
    with pytest.raises(ValueError, match="uint8"):
        pack_codes(np.array([1], np.int32), 4)
    with pytest.raises(ValueError, match="1..8"):
        pack_codes(np.array([1], np.uint8), 9)
    with pytest.raises(ValueError, match="need 2 bytes"):
        unpack_codes(np.zeros(3, np.uint8), 4, 4)
