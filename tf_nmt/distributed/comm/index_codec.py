"""What goes on the wire: a compact (block, uint16) index code and packed sign bits.

Sparse gradients are sent as flat positions into the concatenation of all gradient tensors.
Positions are split into blocks of 2^16: each rank sends the 16 low bits of every position
(``uint16``) plus one ``int32`` count per block, so an index costs 2 bytes instead of 8 (int64)
and the receiver rebuilds the positions from the per-block counts. A rank's positions must be
sorted (GradDrop emits them in increasing order), which keeps each block's entries contiguous.
"""
from __future__ import annotations

from typing import Tuple

from tf_nmt.compat import tf

BLOCK_BITS = 16
BLOCK = 1 << BLOCK_BITS


def num_blocks(total: int) -> int:
    """Blocks of 2^16 positions needed for ``total`` positions (at least 1)."""
    return max(1, -(-int(total) // BLOCK))


def encode_indices(indices: tf.Tensor, total: int) -> Tuple[tf.Tensor, tf.Tensor]:
    """Sorted int64 positions in [0, total) -> (uint16 low bits, int32 count per block)."""
    indices = tf.cast(indices, tf.int64)
    low = tf.cast(tf.bitwise.bitwise_and(indices, BLOCK - 1), tf.uint16)
    blocks = tf.cast(tf.bitwise.right_shift(indices, BLOCK_BITS), tf.int32)
    nb = num_blocks(total)
    counts = tf.math.bincount(blocks, minlength=nb, maxlength=nb, dtype=tf.int32)
    return low, counts


def decode_indices(low: tf.Tensor, counts: tf.Tensor, total: int) -> tf.Tensor:
    """Inverse of :func:`encode_indices` for one or several ranks' concatenated codes.

    ``counts`` is ``num_ranks * num_blocks(total)`` long (rank-major, as an allgather makes it);
    returns the int64 positions in the order they were sent.
    """
    nb = num_blocks(total)
    ranks = tf.size(counts) // nb
    block_ids = tf.repeat(tf.tile(tf.range(nb, dtype=tf.int64), [ranks]), counts)
    return block_ids * BLOCK + tf.cast(low, tf.int64)


def pack_signs(positive: tf.Tensor) -> tf.Tensor:
    """A boolean vector as bits, 8 per uint8 (most significant first), zero-padded."""
    n = tf.size(positive)
    pad = (-n) % 8
    bits = tf.reshape(tf.pad(tf.cast(positive, tf.int32), [[0, pad]]), [-1, 8])
    weights = tf.constant([128, 64, 32, 16, 8, 4, 2, 1], tf.int32)
    return tf.cast(tf.reduce_sum(bits * weights, axis=1), tf.uint8)


def unpack_signs(packed: tf.Tensor) -> tf.Tensor:
    """All bits of ``packed`` (uint8) as a boolean vector of length 8 * len(packed)."""
    shifts = tf.constant([7, 6, 5, 4, 3, 2, 1, 0], tf.int32)
    bits = tf.bitwise.right_shift(tf.cast(packed, tf.int32)[:, None], shifts[None, :])
    return tf.reshape(tf.bitwise.bitwise_and(bits, 1) > 0, [-1])
