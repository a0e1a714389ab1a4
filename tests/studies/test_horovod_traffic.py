"""Sizes of gradients as Horovod receives them (the exchange itself runs in tests/parallel)."""
import pytest

from tf_nmt.compat import tf
from experiments.accumulation.horovod_traffic import TensorExchange, TensorSize, measure, step_totals


def test_dense_tensor_size():
    size = measure(tf.zeros([30, 7], tf.float32))
    assert size == TensorSize(sparse=False, rows=30, nbytes=30 * 7 * 4, dense_nbytes=30 * 7 * 4)
    assert measure(tf.zeros([], tf.float32)).nbytes == 4


def test_indexed_slices_size_counts_values_and_indices():
    grad = tf.IndexedSlices(tf.ones([5, 3, 2]), tf.constant([0, 4, 4, 9, 1], tf.int64),
                            tf.constant([10, 3, 2], tf.int64))
    size = measure(grad)
    assert size.sparse and size.rows == 5
    assert size.nbytes == 5 * 6 * 4 + 5 * 8
    assert size.dense_nbytes == 10 * 6 * 4
    assert measure(tf.convert_to_tensor(grad)).nbytes == size.dense_nbytes


def test_step_totals_split_sparse_and_dense():
    sparse = TensorSize(True, 4, 100, 400)
    dense = TensorSize(False, 3, 60, 60)
    records = [TensorExchange("e", sparse, sparse, TensorSize(True, 8, 200, 400)),
               TensorExchange("w", dense, dense, dense)]
    totals = step_totals(records)
    assert totals == {"contributed_bytes": 160, "buffer_bytes": 260,
                      "sparse_contributed_bytes": 100, "sparse_buffer_bytes": 200,
                      "sparse_dense_bytes": 400, "dense_bytes": 60, "sparse_rows": 4}
    assert records[0].collective == "allgather" and records[1].collective == "allreduce"


def test_mismatched_names_are_an_error():
    from experiments.accumulation.horovod_traffic import exchange_gradients

    with pytest.raises(ValueError, match="2 gradients but 1 names"):
        exchange_gradients([tf.zeros([1]), tf.zeros([1])], ["a"], hvd=None, sparse_as_dense=True)
