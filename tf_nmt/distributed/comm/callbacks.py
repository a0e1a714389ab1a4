"""Keras callbacks of the communication modes: start in sync, periodic sync, per-step statistics."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from tf_nmt.compat import keras
from tf_nmt.distributed.accounting import variables_bytes
from tf_nmt.distributed.comm.averaging import BlockUpdate, ModelAverage, make_sync
from tf_nmt.distributed.comm.settings import HOROVOD_MODES
from tf_nmt.distributed.context import DistContext
from tf_nmt.distributed.sync import broadcast_variables
from tf_nmt.utils.io import write_bytes_atomic


class BroadcastModel(keras.callbacks.Callback):
    """Rank 0's model variables to every rank when a fresh run begins.

    Unlike Horovod's callback (after the first batch, optimizer state included) this leaves
    each rank's optimizer state alone: GradDrop residuals are per rank and must not be copied.
    A resumed run (optimizer step > 0) is left alone too: every rank restored its own state.
    """

    def __init__(self, ctx: DistContext) -> None:
        super().__init__()
        self.ctx = ctx

    def on_train_begin(self, logs=None):
        if int(self.model.optimizer.iterations.numpy()) == 0:
            broadcast_variables(self.model.variables, self.ctx)


class PeriodicSync(keras.callbacks.Callback):
    """Every ``every`` optimizer steps, and once more where training stops, synchronise the
    trainable variables: plain averaging or a BMUF block update (see :func:`make_sync`).

    The last sync happens at the end of the last cycle (``on_epoch_end``), so a checkpoint
    saver placed after this callback saves the synchronised model and one placed before it
    saves each rank's state as training would continue from it (what a resume restores).
    """

    def __init__(self, ctx: DistContext, every: int, kind: str = "average", **kwargs: Any) -> None:
        super().__init__()
        self.ctx, self.every, self.kind, self.kwargs = ctx, every, kind, kwargs
        self.sync: Optional[ModelAverage] = None
        self.last_bytes = 0
        self.syncs = 0
        self._synced_at = -1

    def build(self, variables: Sequence[Any]) -> ModelAverage:
        """Create the sync over ``variables`` now (its state can then be checkpointed)."""
        if self.sync is None:
            self.sync = make_sync(self.kind, variables, self.ctx, **self.kwargs)
        return self.sync

    def on_train_begin(self, logs=None):
        self.build(self.model.trainable_variables)
        if isinstance(self.sync, BlockUpdate) and self._step() == 0:
            self.sync.reset()  # W from the parameters the ranks start from (after the broadcast)

    def _step(self) -> int:
        return int(self.model.optimizer.iterations.numpy())

    def _run(self) -> None:
        self.sync.sync()
        self.syncs += 1
        self.last_bytes = self.sync.payload_bytes
        self._synced_at = self._step()

    def _final(self) -> None:
        if self._step() % self.every != 0 and self._synced_at != self._step():
            self._run()

    def on_train_batch_end(self, batch, logs=None):
        self.last_bytes = 0
        if self._step() % self.every == 0:
            self._run()

    def on_epoch_end(self, epoch, logs=None):
        if self.model.stop_training or epoch + 1 >= self.params.get("epochs", epoch + 2):
            self._final()

    def on_train_end(self, logs=None):
        self._final()


class CommStats(keras.callbacks.Callback):
    """Per step: bytes this rank handed to collectives, the dense-allreduce bytes for the same
    gradients, and (graddrop) the density of the summed sparse gradient.

    Adds ``comm_bytes``, ``comm_dense_bytes`` and ``comm_density`` to the batch logs (so later
    callbacks, e.g. TensorBoard, see them), prints a line every ``every`` steps and writes the
    per-step series to ``out_path`` (JSON, atomically) at the end of training; a resumed run
    keeps the steps the file already holds. For ``dense`` (Horovod allgathers IndexedSlices) the
    bytes reported are those of the densified gradients, i.e. what ``sparse_as_dense`` sends.
    """

    def __init__(self, mode: str, exchange_of: Callable[[Any], Any], sync: Optional[PeriodicSync],
                 every: int, log: Callable[[str], None] = print,
                 out_path: Optional[Path] = None, world_size: int = 1) -> None:
        super().__init__()
        self.mode, self.exchange_of, self.sync = mode, exchange_of, sync
        self.every, self.log, self.out_path, self.world_size = every, log, out_path, world_size
        self.history: List[Dict[str, float]] = []
        self.tensors: Optional[TensorKept] = None  # graddrop: what each tensor got to send

    def on_train_begin(self, logs=None):
        self.dense_bytes = variables_bytes(self.model.trainable_variables)
        self._t0 = time.time()
        step = self._last_step = int(self.model.optimizer.iterations.numpy())
        if self.out_path is not None and Path(self.out_path).is_file():  # a resumed run
            file = json.loads(Path(self.out_path).read_text())
            earlier = file.get("per_step", [])
            self.history = [e for e in earlier if e["step"] <= step] + self.history
            if file.get("per_tensor") and max((e["step"] for e in earlier), default=0) <= step:
                self.tensors = TensorKept.from_summary(file["per_tensor"])  # no step to drop

    def step_stats(self) -> Dict[str, float]:
        exchange = self.exchange_of(self.model.optimizer)
        if exchange is not None:
            stats = exchange.step_stats()
        elif self.mode in HOROVOD_MODES:
            stats = {"sent_bytes": self.dense_bytes, "density": 1.0}
        else:  # local steps: nothing sent between syncs
            stats = {"sent_bytes": 0, "density": 0.0}
        if self.sync is not None:
            stats["sent_bytes"] += self.sync.last_bytes
        stats["dense_bytes"] = self.dense_bytes
        return stats

    def on_train_batch_end(self, batch, logs=None):
        stats = self.step_stats()
        step = int(self.model.optimizer.iterations.numpy())
        exchange = self.exchange_of(self.model.optimizer)
        if exchange is not None and hasattr(exchange, "tensor_stats"):
            kept = exchange.tensor_stats()
            if self.tensors is None or not self.tensors.matches(kept):
                self.tensors = TensorKept(kept, exchange.settings.drop_warmup_steps)
            self.tensors.add(step, kept["kept"])
        entry = {"step": step, **{k: float(v) for k, v in stats.items()}}
        # one entry per step, also where a call ran several (train.steps_per_execution, which
        # only the modes whose stats are the same every step allow)
        last, self._last_step = self._last_step, step
        self.history += [{**entry, "step": s} for s in range(last + 1, step)] + [entry]
        if logs is not None:
            logs.update(comm_bytes=entry["sent_bytes"], comm_dense_bytes=entry["dense_bytes"],
                        comm_density=entry["density"])
        # A single process with Horovod's modes sends nothing: keep the series, skip the line.
        quiet = self.world_size == 1 and self.mode in HOROVOD_MODES
        if step // self.every != last // self.every and not quiet:
            recent = self.history[-self.every:]
            sent = sum(e["sent_bytes"] for e in recent) / len(recent)
            ratio = self.dense_bytes / sent if sent else float("inf")
            self.log(f"comm {self.mode} step {step}: {sent / 1e3:,.1f} kB/step sent vs "
                     f"{self.dense_bytes / 1e3:,.1f} kB dense ({ratio:,.1f}x fewer), density of "
                     f"summed gradient {entry['density']:.4f}")

    def summary(self) -> Dict[str, Any]:
        steps = len(self.history)
        sent = sum(e["sent_bytes"] for e in self.history) / steps if steps else 0.0
        return {"mode": self.mode, "steps": steps, "world_size": self.world_size,
                "dense_bytes_per_step": self.dense_bytes, "sent_bytes_per_step": sent,
                "reduction": (self.dense_bytes / sent) if sent else None,
                "mean_density": (sum(e["density"] for e in self.history) / steps) if steps else None,
                "mean_kept_fraction": (sum(e.get("kept_fraction", e["density"]) for e in self.history)
                                       / steps) if steps else None,
                "syncs": self.sync.syncs if self.sync is not None else 0,
                "per_tensor": self.tensors.summary() if self.tensors is not None else None,
                "per_step": self.history}

    def on_train_end(self, logs=None):
        if self.out_path is not None:
            write_bytes_atomic(Path(self.out_path), json.dumps(self.summary()).encode())


class TensorKept:
    """Per tensor, over the steps of a GradDrop run: how many entries this rank kept in all,
    and after the drop warm-up (``warmup_steps``) how many, and in how many steps none.

    A global threshold compares every tensor's entries with one another; a tensor whose
    gradients are small next to the rest sends rarely (its error-feedback residual grows until
    it crosses), which a threshold per tensor avoids (``train.drop_threshold=per_tensor``).
    """

    def __init__(self, stats: Dict[str, Any], warmup_steps: int) -> None:
        self.names, self.sizes = list(stats["names"]), [int(n) for n in stats["sizes"]]
        self.warmup_steps = int(warmup_steps)
        n = len(self.names)
        self.kept, self.kept_after, self.none_after = [0] * n, [0] * n, [0] * n
        self.steps = self.steps_after = 0

    def matches(self, stats: Dict[str, Any]) -> bool:
        return list(stats["names"]) == self.names and [int(n) for n in stats["sizes"]] == self.sizes

    def add(self, step: int, kept: Sequence[int]) -> None:
        self.steps += 1
        after = step > self.warmup_steps
        self.steps_after += int(after)
        for i, k in enumerate(kept):
            self.kept[i] += int(k)
            if after:
                self.kept_after[i] += int(k)
                self.none_after[i] += int(k == 0)

    def summary(self) -> Dict[str, Any]:
        """The sums (a resumed run adds to them) and each tensor's mean kept fraction."""
        rows = []
        for i, (name, size) in enumerate(zip(self.names, self.sizes)):
            rows.append({"name": name, "size": size, "kept": self.kept[i],
                         "kept_after_warmup": self.kept_after[i],
                         "steps_with_none_after_warmup": self.none_after[i],
                         "mean_kept_fraction": self.kept[i] / (size * self.steps)
                         if self.steps and size else None,
                         "mean_kept_fraction_after_warmup":
                             self.kept_after[i] / (size * self.steps_after)
                             if self.steps_after and size else None})
        return {"warmup_steps": self.warmup_steps, "steps": self.steps,
                "steps_after_warmup": self.steps_after, "tensors": rows}

    @classmethod
    def from_summary(cls, summary: Dict[str, Any]) -> "TensorKept":
        rows = summary["tensors"]
        out = cls({"names": [r["name"] for r in rows], "sizes": [r["size"] for r in rows]},
                  summary["warmup_steps"])
        out.kept = [int(r["kept"]) for r in rows]
        out.kept_after = [int(r["kept_after_warmup"]) for r in rows]
        out.none_after = [int(r["steps_with_none_after_warmup"]) for r in rows]
        out.steps, out.steps_after = int(summary["steps"]), int(summary["steps_after_warmup"])
        return out
