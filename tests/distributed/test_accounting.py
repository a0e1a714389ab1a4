"""Byte accounting of the gradient exchange and its extrapolation."""
import pytest

from tf_nmt.compat import tf
from tf_nmt.distributed import accounting as acc


def test_sizes():
    assert acc.tensor_bytes([8000, 256], "float32") == 8000 * 256 * 4
    assert acc.tensor_bytes([], "int64") == 8
    assert acc.slice_bytes(10, 256, "float32", "int32") == 10 * 256 * 4 + 10 * 4
    assert acc.slice_bytes(0, 256) == 0
    with pytest.raises(ValueError, match="unknown dtype"):
        acc.itemsize("complex64x")
    with pytest.raises(ValueError, match="non-negative"):
        acc.tensor_bytes([-1, 3], "float32")


def test_ring_allreduce_traffic():
    assert acc.ring_allreduce_bytes(1000, 1) == 0
    assert acc.ring_allreduce_bytes(1000, 2) == 1000
    assert acc.ring_allreduce_bytes(1000, 4) == 1500
    with pytest.raises(ValueError, match="positive integer"):
        acc.ring_allreduce_bytes(1000, 0)


def test_allgather_buffer_is_the_sum_of_the_ranks_slices():
    ex = acc.allgather_exchange([100, 250, 50], rank=1)
    assert (ex.contributed, ex.received, ex.buffer) == (250, 150, 400)
    with pytest.raises(ValueError, match="out of range"):
        acc.allgather_exchange([1, 2], rank=2)


def test_allreduce_buffer_is_constant_in_ranks():
    for n in (1, 2, 64, 1200):
        ex = acc.allreduce_exchange(4096, n)
        assert ex.buffer == ex.contributed == 4096
        assert ex.received == pytest.approx(2 * (n - 1) / n * 4096)


def test_projection_matches_a_direct_sum():
    slice_b, emb_dense, rest = 10_263_552, 8_192_000, 30_346_496
    for n in (1, 2, 4, 64, 300, 1200):
        row = acc.project(n, slice_b, emb_dense, rest)
        off = acc.combine([acc.allgather_exchange([slice_b] * n, 0),
                           acc.allreduce_exchange(rest, n)])
        assert row["off_buffer_bytes"] == off.buffer == n * slice_b + rest
        assert row["on_buffer_bytes"] == emb_dense + rest
        assert row["off_received_bytes"] == pytest.approx((n - 1) * slice_b
                                                          + 2 * (n - 1) / n * rest)
        assert row["buffer_ratio"] == pytest.approx((n * slice_b + rest) / (emb_dense + rest))
        assert row["sparse_buffer_ratio"] == pytest.approx(n * slice_b / emb_dense)


def test_no_sparse_gradients_means_ratio_one():
    for row in acc.curve([1, 64, 1200], 0, 0, 1234):
        assert row["buffer_ratio"] == 1.0 and row["sparse_buffer_ratio"] is None


def test_ratio_grows_linearly_with_ranks():
    rows = acc.curve([64, 128], 1000, 500, 0)
    assert rows[1]["buffer_ratio"] == pytest.approx(2 * rows[0]["buffer_ratio"])
    with pytest.raises(ValueError, match=">= 0"):
        acc.project(2, -1, 1, 1)


def test_variables_and_graph_tensor_bytes():
    t = [tf.zeros([3, 4], tf.float32), tf.zeros([5], tf.uint16), tf.zeros([2], tf.int32)]
    assert int(acc.graph_tensors_bytes(t)) == 48 + 10 + 8
    counted = tf.function(acc.graph_tensors_bytes)  # sizes known only when the function runs
    assert int(counted([tf.zeros([7], tf.int64)])) == 56
    variables = [tf.Variable(tf.zeros([10, 3])), tf.Variable(tf.zeros([7]))]
    assert acc.variables_bytes(variables) == 4 * 37
    assert acc.variables_bytes([]) == 0


def test_link_send_bytes_per_comm_mode():
    assert acc.ring_allgather_bytes(1000, 4) == 3000  # its own slice + 2 forwarded
    assert acc.link_send_bytes("sparse_as_dense", 1000, 4) == 1500  # 2 (N-1)/N
    assert acc.link_send_bytes("dense", 1000, 2) == 1000
    assert acc.link_send_bytes("graddrop", 1000, 2) == 1000
    with pytest.raises(ValueError, match="fedavg"):
        acc.link_send_bytes("fedavg", 1000, 2)
