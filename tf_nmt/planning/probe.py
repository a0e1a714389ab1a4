"""What the performance model measures and counts on this machine.

* :func:`probe_step_s`: seconds of one forward+backward+update step of the configured model on one
  process (no exchange: the compute-only step the scaling study isolates), on a batch of random
  ids of ``train.batch_tokens`` tokens;
* :func:`count_gradients`: the model's trainable variables (built, not trained), split into the
  embedding (sparse gradients) and the rest;
  (the models are built by :mod:`tf_nmt.commands.plan` with the trainer's own functions, so that
  this package stays below the training layer);
* :func:`step_bytes`: what one rank hands to the collectives per step for a comm mode, from those
  counts and :mod:`tf_nmt.distributed.accounting`.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Dict

from tf_nmt.config import Config
from tf_nmt.distributed import accounting
from tf_nmt.errors import UsageError
from tf_nmt.planning.model import StepBytes

#: bytes of one graddrop (position, value) pair: int32 + float32
PAIR_BYTES = accounting.itemsize("int32") + accounting.itemsize("float32")


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


def count_gradients(model: Any) -> Gradients:
    """Count a built model's trainable variables (the caller builds it, float32, untrained)."""
    emb = [v for v in model.trainable_variables if "embedding" in v.name]
    rest = [v for v in model.trainable_variables if "embedding" not in v.name]
    width = int(emb[0].shape[-1]) if emb else 0
    params = sum(int(v.shape.num_elements()) for v in model.trainable_variables)
    return Gradients(accounting.variables_bytes(emb), accounting.variables_bytes(rest), width,
                     params)


def step_bytes(cfg: Config, grads: Gradients, tokens_per_rank: float) -> StepBytes:
    """One rank's collective input per optimizer step for ``cfg.train.comm``.

    dense: the embedding's gradient rows are allgathered (a row per source and target token, its
    values and an int32 index), the rest allreduced; sparse_as_dense: everything allreduced;
    graddrop: (position, value) pairs of the kept fraction ``1 - drop_ratio``, allgathered;
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
        kept = (1.0 - t.drop_ratio) * grads.total_bytes / accounting.itemsize("float32")
        return StepBytes(allgather_slice=kept * PAIR_BYTES, slice_follows_batch=False)
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
