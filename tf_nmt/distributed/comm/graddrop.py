"""Gradient dropping across ranks (Aji & Heafield 2017) with optional local-gradient incorporation.

Per step each rank: adds its residual to its gradient, keeps the top (1 - R) of ``|g + r|``
(``tf_nmt.ops.grad_drop_global``: one threshold over all tensors, or per tensor), keeps the rest as
its new residual (error feedback; off: the rest is discarded), and allgathers the kept entries as
(block-coded positions, values) over the concatenation of all tensors. Every rank sums what it
received into the same dense G and divides by N, matching the averaging of dense allreduce; at
R = 0 this is exactly dense training.

Local gradients (Aji, Heafield & Bogoychev 2019): each rank applies ``C = G + (L - S) / N``, i.e.
its own share of the average is its full dense gradient L (without residual) instead of the sparse
S it sent; ranks then drift apart, so parameters are averaged every P steps (a callback). (The
thesis writes ``C = G - S + L`` with G, S and L all divided by N; here G is already the average.)

Above ``exact_below`` entries the threshold is estimated from a seeded sample; the seed is
:func:`sampling_seed` of (rank, step), so every step samples other positions and a resumed run
samples the ones the uninterrupted run did.

With ``one_bit`` the kept values are 1-bit quantised per column (``one_bit_quantize``, error into
the residual) and sent as packed sign bits plus each tensor's per-column means.

Dense fallback: while the drop warm-up still keeps a large fraction, (position, value) pairs cost
more than the dense gradient: an allgather hands each rank N - 1 payloads, a ring allreduce moves
2(N - 1)/N of the dense tensor. Below :func:`dense_fallback_below` (a drop ratio from the byte
model of :mod:`tf_nmt.distributed.accounting`) every rank allreduces the same kept entries
scattered into a dense tensor instead. The sum is the same; only the transport changes, and
the decision depends on the step alone, so all ranks take the same collective.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence

import numpy as np

from tf_nmt.compat import tf
from tf_nmt.distributed import accounting
from tf_nmt.distributed.comm import index_codec
from tf_nmt.distributed.comm.settings import CommSettings
from tf_nmt.ops import grad_drop_global, num_columns, one_bit_quantize

Gather = Callable[[tf.Tensor, str], tf.Tensor]
Reduce = Callable[[tf.Tensor, str], tf.Tensor]


def ramped_drop_ratio(step: tf.Tensor, drop_ratio: float, warmup_steps: int,
                      shape: str = "linear") -> tf.Tensor:
    """R at optimizer step ``step`` (0-based), reaching R at step W-1 and staying there.

    ``linear``: R * (step+1) / W, from R/W at step 0. ``geometric``: the kept fraction
    ``1 - R`` falls geometrically, ``(1-R)^((step+1)/W)``, so the bytes sent shrink by a constant
    factor per step (the linear ramp still keeps half the gradient half-way through).
    """
    if warmup_steps <= 0:
        return tf.constant(drop_ratio, tf.float32)
    frac = tf.minimum(1.0, tf.cast(step + 1, tf.float32) / float(warmup_steps))
    if shape == "geometric":
        return 1.0 - tf.pow(tf.constant(1.0 - drop_ratio, tf.float32), frac)
    if shape != "linear":
        raise ValueError(f"unknown drop warm-up shape {shape!r} (linear or geometric)")
    return tf.constant(drop_ratio, tf.float32) * frac


SEED_STEP_SHIFT = 16  # per-tensor thresholds add the tensor index (< 2**16) to the seed
SEED_RANK_SHIFT = 48  # steps below 2**32 never reach the rank's bits


def sampling_seed(rank: int, step: Any) -> tf.Tensor:
    """The GradDrop sampling seed (int64 tensor) of ``rank`` at optimizer ``step``.

    Distinct for every (rank, step) (and tensor index with per-tensor thresholds), so the sample
    that sets the threshold moves every step instead of always being the same ~0.1% of
    positions; a function of (rank, step) only, so it is reproducible across a resume.
    """
    return (tf.constant(rank << SEED_RANK_SHIFT, tf.int64)
            + tf.cast(step, tf.int64) * (1 << SEED_STEP_SHIFT))


# The names of this module's allgathers ("graddrop_0", ...): TensorFlow names the failed node in
# the error of a broken collective, which is how an elastic run recognises one.
GATHER_PREFIX = "graddrop_"


def as_bytes(tensor: tf.Tensor) -> tf.Tensor:
    """``tensor``'s bytes as a flat uint8 vector (the same bytes, reinterpreted)."""
    if tensor.dtype == tf.uint8:
        return tf.reshape(tensor, [-1])
    return tf.reshape(tf.bitcast(tensor, tf.uint8), [-1])


def from_bytes(data: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    """The inverse of :func:`as_bytes` for a flat vector of ``dtype``."""
    if dtype == tf.uint8:
        return data
    return tf.bitcast(tf.reshape(data, [-1, dtype.size]), dtype)


def gather_as_one(gather: Gather, tensors: Sequence[tf.Tensor], prefix: str) -> List[tf.Tensor]:
    """Allgather each of ``tensors`` as uint8 and read them back in their own dtypes.

    Horovod fuses only allgathers of one dtype into one collective; the codes (uint16 positions,
    int32 block counts, float32 values) would otherwise be three collectives, run one after the
    other, each paying the network's latency and a negotiation (three ALLGATHER spans per step
    in a Horovod timeline of a 2-rank run). As bytes they fuse into one; the bytes sent are the
    same."""
    gathered = [gather(as_bytes(t), f"{prefix}{i}") for i, t in enumerate(tensors)]
    return [from_bytes(g, t.dtype) for g, t in zip(gathered, tensors)]


def horovod_gather(hvd: Any) -> Gather:
    """Concatenate a tensor from every rank along axis 0 (``hvd.allgather``)."""
    return lambda tensor, name: hvd.allgather(tensor, name=name)


def local_gather(tensor: tf.Tensor, name: str) -> tf.Tensor:  # noqa: ARG001 - same signature
    """The single-process "allgather": this rank's tensor."""
    return tensor


def horovod_sum(hvd: Any) -> Reduce:
    """Sum a tensor over every rank (``hvd.allreduce`` with ``op=hvd.Sum``)."""
    return lambda tensor, name: hvd.allreduce(tensor, op=hvd.Sum, name=name)


def local_sum(tensor: tf.Tensor, name: str) -> tf.Tensor:  # noqa: ARG001 - same signature
    """The single-process sum over ranks: this rank's tensor."""
    return tensor


def sparse_payload_bytes(kept: float, total: int, one_bit: bool = False, columns: int = 0) -> float:
    """Bytes one rank hands to the allgathers when it keeps ``kept`` of ``total`` entries: a
    2-byte position and a float32 value (1 bit with ``one_bit``, plus two float32 means per
    column) per entry, and an int32 count per position block (:mod:`index_codec`)."""
    per_entry = 2.0 + (0.125 if one_bit else 4.0)
    fixed = 4.0 * index_codec.num_blocks(total) + (8.0 * columns if one_bit else 0.0)
    return kept * per_entry + fixed


def dense_fallback_below(total: int, ranks: int, one_bit: bool = False, columns: int = 0) -> float:
    """The drop ratio under which allreducing the kept entries as a dense float32 tensor puts
    fewer bytes on each rank's link than allgathering them as (position, value) pairs
    (``accounting.link_send_bytes``, with the expected ``(1 - R) * total`` kept entries).
    0.0 where the allgather is never dearer (one rank, or 1-bit values on few ranks)."""
    if ranks < 2 or total < 1:
        return 0.0
    dense = accounting.link_send_bytes("dense", accounting.tensor_bytes([total], "float32"), ranks)
    cost = [accounting.link_send_bytes("graddrop",
                                       sparse_payload_bytes(k * total, total, one_bit, columns),
                                       ranks) for k in (0.0, 1.0)]
    if cost[1] <= dense:  # sparse is cheaper even when everything is kept
        return 0.0
    kept_fraction = (dense - cost[0]) / (cost[1] - cost[0])  # costs are linear in what is kept
    return float(min(1.0, max(0.0, 1.0 - kept_fraction)))


class GradDropExchange:
    """Turns this rank's gradients into the exchanged ones; keeps per-step statistics.

    ``seed`` is the rank: the op's sampling seed is :func:`sampling_seed` of it and the step.
    """

    def __init__(self, settings: CommSettings, shapes: Sequence[tf.TensorShape], num_ranks: int,
                 gather: Gather = local_gather, seed: int = 0, reduce: Reduce = local_sum,
                 dense_fallback: bool = True, names: Optional[Sequence[str]] = None) -> None:
        self.settings, self.num_ranks, self.gather, self.seed = settings, num_ranks, gather, seed
        self.reduce = reduce
        self.shapes = [tf.TensorShape(s) for s in shapes]
        if names is not None and len(names) != len(self.shapes):
            raise ValueError(f"{len(names)} names for {len(self.shapes)} tensors")
        # for the per-tensor statistics: which tensors a global threshold starves
        self.names = list(names) if names is not None else [f"tensor_{i}"
                                                             for i in range(len(self.shapes))]
        self.sizes = [int(s.num_elements()) for s in self.shapes]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.total = int(self.offsets[-1])
        self.dense_bytes = accounting.tensor_bytes([self.total], "float32")  # exchanged as float32
        self.columns = [wire_columns(s) for s in self.shapes]
        self.column_offsets = np.concatenate([[0], np.cumsum(self.columns)]).astype(np.int64)
        # the drop ratio below which the dense allreduce is cheaper (0: never; see dense_fallback_below)
        self.dense_below = (dense_fallback_below(self.total, num_ranks, settings.one_bit,
                                                 int(self.column_offsets[-1]))
                            if dense_fallback else 0.0)
        with tf.init_scope():  # may be built while Keras traces the train step
            self.sent_bytes = tf.Variable(0, dtype=tf.int64, trainable=False, name="gd_sent_bytes")
            self.kept = tf.Variable(0, dtype=tf.int64, trainable=False, name="gd_kept")
            self.union = tf.Variable(0, dtype=tf.int64, trainable=False, name="gd_union")
            self.ratio = tf.Variable(0.0, dtype=tf.float32, trainable=False, name="gd_ratio")
            self.fell_back = tf.Variable(False, trainable=False, name="gd_dense_fallback")
            self.kept_per_tensor = tf.Variable(tf.zeros([len(self.shapes)], tf.int64),
                                               trainable=False, name="gd_kept_per_tensor")

    # -- sender -----------------------------------------------------------------------------
    def drop(self, grads: List[tf.Tensor], residuals: List[tf.Tensor], drop_ratio: tf.Tensor,
             step: Any = 0):
        """(sorted global positions, values to send, new residuals) for this rank at ``step``."""
        dropped = grad_drop_global(grads, residuals, drop_ratio,
                                   seed=sampling_seed(self.seed, step),
                                   per_tensor=self.settings.per_tensor)
        positions, values, new_residuals = [], [], []
        for i, (idx, vals, res) in enumerate(dropped):
            if self.settings.one_bit:
                vals, res, _, _ = one_bit_quantize(idx, vals, res)
            positions.append(idx + int(self.offsets[i]))
            values.append(vals)
            new_residuals.append(res)
        return tf.concat(positions, 0), tf.concat(values, 0), new_residuals

    def _one_bit_means(self, positions: tf.Tensor, values: tf.Tensor):
        """Per global column: the (positive, negative) value every kept entry was quantised to."""
        cols = self._global_columns(positions)
        n = int(self.column_offsets[-1])
        pos = tf.math.unsorted_segment_max(tf.where(values > 0, values, 0.0), cols, n)
        neg = tf.math.unsorted_segment_min(tf.where(values < 0, values, 0.0), cols, n)
        return tf.maximum(pos, 0.0), tf.minimum(neg, 0.0)

    def _global_columns(self, positions: tf.Tensor) -> tf.Tensor:
        tensor = tf.searchsorted(tf.constant(self.offsets[1:]), positions, side="right")
        local = positions - tf.gather(tf.constant(self.offsets), tensor)
        return (tf.gather(tf.constant(self.column_offsets[:-1]), tensor)
                + local % tf.gather(tf.constant(self.columns, tf.int64), tensor))

    def encode(self, positions: tf.Tensor, values: tf.Tensor) -> List[tf.Tensor]:
        """The tensors this rank hands to the allgathers."""
        if self.settings.one_bit:
            keep = tf.not_equal(values, 0.0)  # a kept zero carries nothing; 1 bit cannot say "0"
            positions, values = tf.boolean_mask(positions, keep), tf.boolean_mask(values, keep)
        low, counts = index_codec.encode_indices(positions, self.total)
        if not self.settings.one_bit:
            return [low, counts, values]
        pos_means, neg_means = self._one_bit_means(positions, values)
        return [low, counts, index_codec.pack_signs(values > 0), pos_means, neg_means]

    # -- receiver ---------------------------------------------------------------------------
    def decode(self, gathered: List[tf.Tensor]):
        """(positions, values) of every rank's kept entries, rank after rank."""
        low, counts = gathered[0], gathered[1]
        positions = index_codec.decode_indices(low, counts, self.total)
        if not self.settings.one_bit:
            return positions, gathered[2]
        bits, pos_means, neg_means = gathered[2:]
        nb = index_codec.num_blocks(self.total)
        per_rank = tf.reduce_sum(tf.reshape(counts, [-1, nb]), axis=1)  # entries sent by each rank
        ranks = tf.size(per_rank)
        rank_of = tf.repeat(tf.range(ranks), per_rank)
        first_entry = tf.cumsum(per_rank, exclusive=True)
        first_bit = 8 * tf.cumsum((per_rank + 7) // 8, exclusive=True)
        entry = tf.range(tf.size(rank_of))
        bit = tf.gather(first_bit, rank_of) + entry - tf.gather(first_entry, rank_of)
        positive = tf.gather(index_codec.unpack_signs(bits), bit)
        n_cols = int(self.column_offsets[-1])
        table = tf.cast(rank_of, tf.int64) * n_cols + self._global_columns(positions)
        values = tf.where(positive, tf.gather(pos_means, table), tf.gather(neg_means, table))
        return positions, values

    # -- one step ---------------------------------------------------------------------------
    def exchange(self, grads: Sequence[Any], residuals: Optional[Sequence[tf.Variable]],
                 step: tf.Tensor) -> List[tf.Tensor]:
        """The gradients to apply on this rank; updates ``residuals`` (error feedback) in place."""
        dense = [tf.cast(tf.convert_to_tensor(g), tf.float32) for g in grads]  # IndexedSlices too
        res_in = ([tf.convert_to_tensor(r) for r in residuals] if residuals is not None
                  else [tf.zeros_like(g) for g in dense])
        ratio = ramped_drop_ratio(step, self.settings.drop_ratio, self.settings.drop_warmup_steps,
                                  self.settings.drop_warmup_shape)
        positions, values, new_residuals = self.drop(dense, res_in, ratio, step)

        def sparse():  # allgather the (position, value) pairs
            sent = self.encode(positions, values)
            gathered = gather_as_one(self.gather, sent, GATHER_PREFIX)
            all_positions, all_values = self.decode(gathered)
            summed = tf.scatter_nd(all_positions[:, None], all_values, [self.total])
            own = summed
            if self.settings.local_gradients:
                own_positions, own_values = self.decode(sent)
                own = tf.scatter_nd(own_positions[:, None], own_values, [self.total])
            return (summed, own, accounting.graph_tensors_bytes(sent),
                    tf.cast(tf.size(tf.unique(all_positions).y), tf.int64))

        def dense_sum():  # allreduce the same kept entries as one dense tensor
            own = tf.scatter_nd(positions[:, None], values, [self.total])
            summed = self.reduce(own, f"{GATHER_PREFIX}dense")
            return (summed, own, tf.constant(self.dense_bytes, tf.int64),
                    tf.math.count_nonzero(summed, dtype=tf.int64))

        if self.dense_below > 0.0:  # the same decision on every rank: it depends on the step only
            fall_back = ratio < self.dense_below
            summed, own, sent_bytes, union = tf.cond(fall_back, dense_sum, sparse)
        else:
            fall_back = tf.constant(False)
            summed, own, sent_bytes, union = sparse()
        update = summed / float(self.num_ranks)
        if self.settings.local_gradients:
            local = tf.concat([tf.reshape(g, [-1]) for g in dense], 0)
            update = update + (local - own) / float(self.num_ranks)
        ops = [self.sent_bytes.assign(sent_bytes),
               self.kept.assign(tf.cast(tf.size(positions), tf.int64)),
               self.kept_per_tensor.assign(self._per_tensor(positions)),
               self.union.assign(union), self.ratio.assign(ratio),
               self.fell_back.assign(fall_back)]
        if residuals is not None:
            ops += [r.assign(n) for r, n in zip(residuals, new_residuals)]
        with tf.control_dependencies(ops):
            pieces = tf.split(update, self.sizes) if len(self.sizes) > 1 else [update]
            return [tf.cast(tf.reshape(p, s), g.dtype) for p, s, g in zip(pieces, self.shapes, grads)]

    def _per_tensor(self, positions: tf.Tensor) -> tf.Tensor:
        """How many of this rank's kept global ``positions`` fall in each tensor."""
        tensor = tf.searchsorted(tf.constant(self.offsets[1:]), positions, side="right")
        n = len(self.shapes)
        return tf.math.bincount(tf.cast(tensor, tf.int32), minlength=n, maxlength=n,
                                dtype=tf.int64)

    def tensor_stats(self) -> dict:
        """Per tensor (by name): its size and how many entries this rank kept in the last step."""
        return {"names": self.names, "sizes": self.sizes,
                "kept": [int(k) for k in self.kept_per_tensor.numpy()]}

    def step_stats(self) -> dict:
        """Statistics of the last exchange (read eagerly after a step)."""
        kept = int(self.kept.numpy())
        return {"sent_bytes": int(self.sent_bytes.numpy()), "kept": kept,
                "kept_fraction": kept / max(self.total, 1),
                "density": int(self.union.numpy()) / max(self.total, 1),
                "drop_ratio": float(self.ratio.numpy()), "dense_bytes": self.dense_bytes,
                "dense_fallback": bool(self.fell_back.numpy())}


def wire_columns(shape: tf.TensorShape) -> int:
    """Columns of a tensor for 1-bit quantisation (as ``tf_nmt.ops.one_bit_quantize`` uses)."""
    return num_columns(shape.as_list())
