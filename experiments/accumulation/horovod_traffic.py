"""Measuring one step's gradient exchange from the tensors Horovod actually moves.

:func:`exchange_gradients` does what Horovod's ``DistributedGradientTape`` does to a list of local
gradients (densify IndexedSlices when ``sparse_as_dense``, then ``hvd.allreduce`` with averaging:
an allgather of values and indices for IndexedSlices, an allreduce otherwise), one tensor at a
time, and records per tensor the bytes this rank handed to Horovod and the bytes of the result
Horovod returned (the gathered or reduced buffer).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tf_nmt.compat import tf
from tf_nmt.distributed.accounting import slice_bytes, tensor_bytes


@dataclass(frozen=True)
class TensorSize:
    """Size of one gradient as a tensor or IndexedSlices."""

    sparse: bool
    rows: int            # IndexedSlices rows (first dimension for a dense tensor)
    nbytes: int          # values + indices for IndexedSlices, the tensor otherwise
    dense_nbytes: int    # the variable-shaped (densified) size


def measure(grad: Any) -> TensorSize:
    """Sizes of an eager tensor or ``tf.IndexedSlices``."""
    if isinstance(grad, tf.IndexedSlices):
        values = grad.values
        rows = int(values.shape[0])
        row_elements = 1
        for dim in values.shape[1:]:
            row_elements *= int(dim)
        dense_shape = [int(d) for d in tf.convert_to_tensor(grad.dense_shape).numpy()]
        return TensorSize(True, rows, slice_bytes(rows, row_elements, values.dtype.name,
                                                  grad.indices.dtype.name),
                          tensor_bytes(dense_shape, values.dtype.name))
    shape = [int(d) for d in grad.shape]
    nbytes = tensor_bytes(shape, grad.dtype.name)
    return TensorSize(False, shape[0] if shape else 1, nbytes, nbytes)


@dataclass(frozen=True)
class TensorExchange:
    """One gradient tensor's exchange on this rank."""

    name: str
    local: TensorSize    # the local gradient as computed
    sent: TensorSize     # what was handed to Horovod (densified when sparse_as_dense)
    result: TensorSize   # what Horovod returned

    @property
    def collective(self) -> str:
        return "allgather" if self.sent.sparse else "allreduce"

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "collective": self.collective, "local": asdict(self.local),
                "sent": asdict(self.sent), "result": asdict(self.result)}


def exchange_gradients(grads: Sequence[Any], names: Sequence[str], hvd: Any,
                       sparse_as_dense: bool) -> Tuple[List[Any], List[TensorExchange]]:
    """Average ``grads`` over all ranks with ``hvd`` (``horovod.tensorflow``), eagerly.

    Returns the averaged gradients (IndexedSlices stay IndexedSlices when not densified) and
    one :class:`TensorExchange` per non-None gradient. Every rank must call this with the
    same tensors in the same order.
    """
    if len(grads) != len(names):
        raise ValueError(f"{len(grads)} gradients but {len(names)} names")
    averaged: List[Optional[Any]] = []
    records: List[TensorExchange] = []
    for grad, name in zip(grads, names):
        if grad is None:
            averaged.append(None)
            continue
        local = measure(grad)
        sent = tf.convert_to_tensor(grad) if sparse_as_dense and local.sparse else grad
        result = hvd.allreduce(sent, op=hvd.Average)
        averaged.append(result)
        records.append(TensorExchange(name, local, measure(sent), measure(result)))
    return averaged, records


def step_totals(records: Sequence[TensorExchange]) -> Dict[str, int]:
    """Per-step byte totals of one rank: contributed, result buffer, and the sparse part."""
    sparse = [r for r in records if r.sent.sparse]
    return {"contributed_bytes": sum(r.sent.nbytes for r in records),
            "buffer_bytes": sum(r.result.nbytes for r in records),
            "sparse_contributed_bytes": sum(r.sent.nbytes for r in sparse),
            "sparse_buffer_bytes": sum(r.result.nbytes for r in sparse),
            "sparse_dense_bytes": sum(r.sent.dense_nbytes for r in sparse),
            "dense_bytes": sum(r.sent.nbytes for r in records if not r.sent.sparse),
            "sparse_rows": sum(r.sent.rows for r in sparse)}
