"""What the performance model measures and counts on this machine.

* :func:`probe_step_s`: seconds of one forward+backward+update step of the configured model on one
  process (no exchange: the compute-only step the scaling study isolates), on a batch of random
  ids of ``train.batch_tokens`` tokens;
* :func:`count_gradients`: the model's trainable variables (built, not trained), split into those
  whose gradient is sparse (an IndexedSlices: a table only looked up) and the rest, found by one
  gradient on a tiny batch (a tied embedding, also the output projection, has a dense one);
  (the models are built by :mod:`tf_nmt.commands.plan` with the trainer's own functions, so that
  this package stays below the training layer);
* :func:`step_bytes`: what one rank hands to the collectives per step for a comm mode, from those
  counts and :mod:`tf_nmt.distributed.accounting`.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Dict, List

from tf_nmt.config import Config
from tf_nmt.distributed import accounting
from tf_nmt.errors import UsageError
from tf_nmt.planning.model import StepBytes

@dataclass(frozen=True)
class Gradients:
    """Gradient sizes of one model (float32 bytes) and its embedding width."""

    embedding_bytes: int
    rest_bytes: int
    embedding_width: int
    parameters: int

    @property
    def total_bytes(self) -> int:
        return self.embedding_bytes + self.rest_bytes

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def sparse_gradient_flags(model: Any, vocab_size: int) -> List[bool]:
    """Per trainable variable of ``model``: whether its gradient is an IndexedSlices, from one
    gradient of the summed logits on a batch of 2 x 4 random ids (what Horovod allgathers in
    ``dense`` mode, where the name alone misleads: a tied embedding's gradient is dense)."""
    import numpy as np

    from tf_nmt.compat import tf
    from tf_nmt.data.tokenizer import EOS_ID

    ids = lambda: tf.constant(np.random.default_rng(0).integers(  # noqa: E731
        EOS_ID + 1, vocab_size, (2, 4)), tf.int32)
    variables = model.trainable_variables
    with tf.GradientTape() as tape:
        logits = model({"source": ids(), "target_in": ids()}, training=False)
        total = tf.reduce_sum(tf.cast(logits, tf.float32))
    grads = tape.gradient(total, variables)
    return [isinstance(g, tf.IndexedSlices) for g in grads]


def count_gradients(model: Any, vocab_size: int) -> Gradients:
    """Count a built model's trainable variables (the caller builds it, float32, untrained),
    split by :func:`sparse_gradient_flags`."""
    flags = sparse_gradient_flags(model, vocab_size)
    emb = [v for v, sparse in zip(model.trainable_variables, flags) if sparse]
    rest = [v for v, sparse in zip(model.trainable_variables, flags) if not sparse]
    width = int(emb[0].shape[-1]) if emb else 0
    params = sum(int(v.shape.num_elements()) for v in model.trainable_variables)
    return Gradients(accounting.variables_bytes(emb), accounting.variables_bytes(rest), width,
                     params)


def step_bytes(cfg: Config, grads: Gradients, tokens_per_rank: float) -> StepBytes:
    """One rank's collective input per optimizer step for ``cfg.train.comm``.

    dense: the rows of the sparse gradients (:func:`sparse_gradient_flags`; none when the
    embedding is tied) are allgathered (a row per source and target token, its values and an
    int64 index), the rest allreduced; sparse_as_dense: everything allreduced;
    graddrop: the kept fraction ``1 - drop_ratio`` of all entries as the wire code its exchange
    sends (:func:`tf_nmt.distributed.comm.graddrop.sparse_payload_bytes`: 2-byte positions,
    float32 values or 1-bit signs, block counts), allgathered;
    fedavg/bmuf: a parameter average every ``average_every`` steps. Accumulation
    (``backward_passes_per_step``) is in the compute, not here: one exchange per optimizer step."""
    t = cfg.train
    if t.comm == "sparse_as_dense":
        return StepBytes(allreduce=grads.total_bytes)
    if t.comm == "dense":
        rows = 2 * tokens_per_rank  # source and target_in tokens each touch one row
        slice_bytes = accounting.slice_bytes(int(rows), grads.embedding_width) if grads.embedding_width else 0
        return StepBytes(allreduce=grads.rest_bytes, allgather_slice=float(slice_bytes))
    if t.comm == "graddrop":
        from tf_nmt.distributed.comm.graddrop import sparse_payload_bytes

        if t.one_bit:
            raise UsageError("tf-nmt plan has no model for train.one_bit=true (its per-column "
                             "means depend on every tensor's shape)")
        entries = grads.total_bytes // accounting.itemsize("float32")
        payload = sparse_payload_bytes((1.0 - t.drop_ratio) * entries, entries)
        return StepBytes(allgather_slice=payload, slice_follows_batch=False,
                         graddrop_entries=float(entries))
    if t.comm in ("fedavg", "bmuf"):
        return StepBytes(periodic=float(grads.total_bytes), period=int(t.average_every))
    raise UsageError(f"tf-nmt plan has no model for train.comm={t.comm}")


def random_batch(cfg: Config, length: int, seed: int = 0):
    """``({"source", "target_in"}, target_out)`` of ``batch_tokens // length`` sentences."""
    import numpy as np

    from tf_nmt.data.tokenizer import EOS_ID

    sentences = max(1, cfg.data.batch_tokens // length)
    rng = np.random.default_rng(seed)
    ids = lambda: rng.integers(EOS_ID + 1, cfg.data.vocab_size,  # noqa: E731
                               (sentences, length)).astype(np.int32)
    return {"source": ids(), "target_in": ids()}, ids()


def probe_step_s(cfg: Config, model: Any, length: int = 32, steps: int = 3,
                 warmup: int = 1) -> float:
    """Median seconds of a compute-only training step (forward+backward+update, one process) of
    ``model`` (compiled for ``cfg`` on one process by the caller), times
    ``backward_passes_per_step`` micro-batches per optimizer step."""
    import statistics

    if steps < 1 or warmup < 0 or length < 1:
        raise UsageError("--probe-steps and --probe-length must be >= 1, warm-up >= 0")
    x, y = random_batch(cfg, length)
    for _ in range(warmup):
        model.train_on_batch(x, y)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        model.train_on_batch(x, y)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * cfg.train.backward_passes_per_step


def _median_s(fn: Any, repeats: int) -> float:
    """Median seconds of ``fn()`` over ``repeats`` calls after two warm-up calls."""
    import statistics

    def once() -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    once(), once()  # warm-up: tracing, allocation
    return statistics.median(once() for _ in range(repeats))


def probe_cpu(shapes: List[Any], drop_ratio: float = 0.99, nbytes: int = 0,
              repeats: int = 15) -> Dict[str, float]:
    """The exchange's CPU constants on this process (seconds; medians over ``repeats``):

    * ``gamma_s_per_byte``: an element-wise float32 add of ``nbytes`` (default the gradient's)
      divided by its bytes (the reduction step of a ring allreduce);
    * ``copy_s_per_byte``: a copy of as many bytes (Horovod's fusion buffer);
    * ``graddrop_s_per_entry``: GradDrop's exchange of gradients of ``shapes`` on one rank
      (:class:`tf_nmt.distributed.comm.graddrop.GradDropExchange` with a local gather: selection,
      residual, encoding, decoding, scatter) divided by the gradient's entries."""
    import numpy as np

    from tf_nmt.compat import tf
    from tf_nmt.distributed.comm.graddrop import GradDropExchange
    from tf_nmt.distributed.comm.settings import CommSettings

    if repeats < 1 or not 0.0 < drop_ratio < 1.0:
        raise UsageError("the CPU probe needs repeats >= 1 and a drop ratio in (0, 1)")
    shapes = [tf.TensorShape(s) for s in shapes]
    entries = sum(int(s.num_elements()) for s in shapes)
    nbytes = nbytes or 4 * entries
    rng = np.random.default_rng(0)
    a = tf.constant(rng.standard_normal(nbytes // 4).astype(np.float32))
    b = tf.constant(rng.standard_normal(nbytes // 4).astype(np.float32))
    add = tf.function(lambda: a + b)
    gamma = _median_s(lambda: add().numpy(), repeats) / nbytes
    src = np.ones(nbytes, np.uint8)
    dst = np.empty_like(src)
    copy = _median_s(lambda: np.copyto(dst, src), repeats) / nbytes
    grads = [tf.constant(rng.standard_normal(s.as_list()).astype(np.float32)) for s in shapes]
    residuals = [tf.Variable(tf.zeros(s)) for s in shapes]
    settings = CommSettings(mode="graddrop", drop_ratio=drop_ratio, drop_warmup_steps=0)
    exchange = GradDropExchange(settings, shapes, 1, dense_fallback=False)
    step = tf.constant(100, tf.int64)
    run = tf.function(lambda: exchange.exchange(grads, residuals, step))
    graddrop = _median_s(lambda: run()[0].numpy(), repeats) / entries
    return {"gamma_s_per_byte": gamma, "copy_s_per_byte": copy, "graddrop_s_per_entry": graddrop,
            "bytes": float(nbytes), "entries": float(entries), "drop_ratio": drop_ratio,
            "repeats": float(repeats)}
