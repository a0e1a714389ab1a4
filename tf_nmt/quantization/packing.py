"""B-bit codes (1 <= B <= 8) packed into bytes as a little-endian bit stream, and unpacked again.

Code ``i`` occupies bits ``[i*B, (i+1)*B)`` of the stream, bit ``j`` of the stream being bit
``j % 8`` of byte ``j // 8``. For B = 4 (the thesis's setting, and the common case) this is
exactly two codes per byte, low nibble first, and is done by the C++ ``PackNibbles`` /
``UnpackNibbles`` ops; other widths use NumPy bit streams; for B = 8 it is the codes themselves.
A tensor of ``n`` codes takes ``ceil(n * B / 8)`` bytes.

:func:`unpack_codes_tf` undoes the packing with stock TensorFlow ops only, so that a SavedModel
using it loads in a process that has never seen tf-nmt's custom op library.
"""
from __future__ import annotations

import numpy as np

from tf_nmt.compat import tf
from tf_nmt.ops.log_quant import pack_nibbles, unpack_nibbles


def _check_bits(bits: int) -> int:
    if not isinstance(bits, (int, np.integer)) or not 1 <= int(bits) <= 8:
        raise ValueError(f"bits must be an integer in 1..8, got {bits!r}")
    return int(bits)


def packed_size(count: int, bits: int) -> int:
    """Bytes needed for ``count`` codes of ``bits`` bits."""
    return (int(count) * _check_bits(bits) + 7) // 8


def pack_codes(codes: np.ndarray, bits: int) -> np.ndarray:
    """Flattened uint8 ``codes`` (each < 2**bits) -> packed uint8 bytes."""
    bits = _check_bits(bits)
    codes = np.asarray(codes)
    if codes.dtype != np.uint8:
        raise ValueError(f"codes must be uint8, got {codes.dtype}")
    flat = codes.ravel()
    if flat.size and int(flat.max()) >> bits:
        raise ValueError(f"a code does not fit in {bits} bits (max code {int(flat.max())})")
    if bits == 8:
        return flat.copy()
    if bits == 4:
        return pack_nibbles(flat).numpy()
    stream = np.unpackbits(flat[:, None], axis=1, bitorder="little")[:, :bits]
    return np.packbits(stream.ravel(), bitorder="little")


def unpack_codes(packed: np.ndarray, count: int, bits: int) -> np.ndarray:
    """Inverse of :func:`pack_codes`: ``count`` uint8 codes."""
    bits = _check_bits(bits)
    packed = np.asarray(packed)
    if packed.dtype != np.uint8 or packed.ndim != 1:
        raise ValueError(f"packed must be a uint8 vector, got {packed.dtype} of rank {packed.ndim}")
    if packed.size != packed_size(count, bits):
        raise ValueError(f"{count} codes of {bits} bits need {packed_size(count, bits)} bytes, "
                         f"got {packed.size}")
    if bits == 8:
        return packed.copy()
    if bits == 4:
        return unpack_nibbles(packed, count).numpy()
    stream = np.unpackbits(packed, bitorder="little")[: count * bits].reshape(count, bits)
    weights = (1 << np.arange(bits)).astype(np.uint16)
    return (stream.astype(np.uint16) @ weights).astype(np.uint8)


def unpack_codes_tf(packed: tf.Tensor, count: int, bits: int) -> tf.Tensor:
    """Graph version of :func:`unpack_codes` built from stock TF ops (uint8 vector of ``count``)."""
    bits = _check_bits(bits)
    packed = tf.convert_to_tensor(packed, tf.uint8)
    if bits == 8:
        return packed[:count]
    mask = tf.constant((1 << bits) - 1, tf.uint8)
    if 8 % bits == 0:  # whole codes per byte: shift out each field
        shifts = tf.constant(np.arange(0, 8, bits, dtype=np.uint8))
        fields = tf.bitwise.bitwise_and(tf.bitwise.right_shift(packed[:, None], shifts[None, :]), mask)
        return tf.reshape(fields, [-1])[:count]
    # Codes straddle bytes: expand to the bit stream, then weigh B consecutive bits.
    positions = tf.constant(np.arange(8, dtype=np.uint8))
    stream = tf.bitwise.bitwise_and(tf.bitwise.right_shift(packed[:, None], positions[None, :]),
                                    tf.constant(1, tf.uint8))
    stream = tf.reshape(stream, [-1])[: count * bits]
    weights = tf.constant((1 << np.arange(bits)).astype(np.int32))
    grouped = tf.reshape(tf.cast(stream, tf.int32), [count, bits])
    return tf.cast(tf.reduce_sum(grouped * weights[None, :], axis=1), tf.uint8)
