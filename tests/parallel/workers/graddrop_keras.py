"""Worker for tests/parallel/test_graddrop_keras3.py: GradDrop on tf-nmt's Transformer under
``horovodrun -np 2``, launched once with ``TF_NMT_KERAS=2`` and once with ``TF_NMT_KERAS=3``.

Every scenario trains through the trainer's own pieces (``build_and_compile``: Adam, the
schedule scaled to 2 workers, ``comm.wrap_optimizer``; ``comm.comm_callbacks`` with the run's
accounting record, ``comm_stats.json``) from the same start in both versions: the i-th weight
is set from a generator seeded by i (the two versions build the weights in the same order and
shapes, not with the same names), so the two launches differ only in the Keras they run. Each
rank trains on its own synthetic batches (fixed length, no padding), the same in both launches.

* ``SCENARIOS``: GradDrop with residuals (error feedback), with local gradients and a parameter
  average every 3 steps, and with 1-bit values; per step the rank-local losses and the
  accounting record, the final weights, the residual norms;
* resume (Keras 3 launch only; Keras 2's is tests/parallel/test_resume_exact.py):
  :func:`tests.parallel.workers.resume.run_mode` (``train`` itself, stopped and resumed) for
  ``graddrop`` and ``graddrop_local``.

``GRADDROP_KERAS_PLANT`` (the Keras 3 launch only): ``residuals`` trains without feeding the
residuals back (no error feedback), ``local`` ignores the local gradients; the agreement test
must then fail.

Writes ``<out>/rank<r>.json`` and ``<out>/rank<r>.npz`` (final weights, ``<scenario>/<index>``).
"""
import json
import os
import sys
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # repo root, when not installed

import numpy as np  # noqa: E402

from tests.parallel.workers import run_rank  # noqa: E402
from tests.parallel.workers.keras3_tfnmt import StepLosses  # noqa: E402 - either Keras
from tf_nmt.compat import KERAS_VERSION, keras, keras_name, tf, variable_name  # noqa: E402
from tf_nmt.config import load_config  # noqa: E402
from tf_nmt.distributed import comm  # noqa: E402
from tf_nmt.distributed.comm.optimizer import exchange_of, residual_variables  # noqa: E402
from tf_nmt.training.trainer import build_and_compile, validate_config  # noqa: E402

PLANT_VAR = "GRADDROP_KERAS_PLANT"
VOCAB, SRC_LEN, TGT_LEN = 40, 5, 6
BATCH, STEPS = 4, 6
TINY = ["model.kind=transformer", "model.num_layers=1", "model.d_model=16", "model.num_heads=2",
        "model.ff_dim=32", "model.dropout=0.0", "train.warmup_steps=4", "train.peak_lr=0.01",
        "train.seed=7", "train.loss_kernel=tf", "train.mixed_precision=false",
        "train.epsilon=1e-3"]  # see tests/parallel/test_keras3_tfnmt.py for the epsilon
GRADDROP = ["train.comm=graddrop", "train.drop_ratio=0.9", "train.drop_warmup_steps=2"]
SCENARIOS: Dict[str, List[str]] = {
    "residuals": GRADDROP,
    "local": GRADDROP + ["train.local_gradients=true", "train.average_every=3"],
    "one_bit": GRADDROP + ["train.one_bit=true"],
}
RESUME_MODES = ("graddrop_local",)  # residuals and local gradients: both per-rank states


def rank_batches(rank: int):
    """This rank's STEPS batches (source, target_in, target_out), the same in both launches."""
    rng = np.random.default_rng(1000 + rank)
    src = rng.integers(4, VOCAB, (STEPS * BATCH, SRC_LEN)).astype("int32")
    tgt = rng.integers(4, VOCAB, (STEPS * BATCH, TGT_LEN + 1)).astype("int32")
    return src, tgt[:, :-1], tgt[:, 1:]


def set_start(model) -> List[List[int]]:
    """Give the i-th weight (``model.weights`` order, the same in both versions; the names are
    not) of more than one dimension a value drawn from a generator seeded by i; 1-D weights keep
    their deterministic zeros and ones. Returns the shapes, in that order."""
    shapes = []
    for i, weight in enumerate(model.weights):
        shape = [int(d) for d in weight.shape]
        shapes.append(shape)
        if len(shape) < 2:
            continue
        rng = np.random.default_rng(1000 + i)
        scale = np.sqrt(2.0 / (shape[0] + shape[-1]))
        weight.assign(rng.normal(0.0, scale, shape).astype(np.float32))
    return shapes


def plant(optimizer, settings, ctx) -> None:
    """The defects the agreement test must catch (the Keras 3 launch only)."""
    what = os.environ.get(PLANT_VAR, "")
    if not what or KERAS_VERSION != 3:
        return
    if what == "residuals":  # error feedback off: what is not sent is lost
        optimizer._comm_residuals = False  # noqa: SLF001 - before the first step builds them
    elif what == "local":  # the local gradients ignored: C = G
        made = optimizer._comm_factory  # noqa: SLF001

        def factory(variables):
            exchange = made(variables)
            exchange.settings = replace(exchange.settings, local_gradients=False)
            return exchange

        optimizer._comm_factory = factory  # noqa: SLF001
    else:
        raise ValueError(f"{PLANT_VAR}={what!r}: residuals or local")


def scenario(ctx, name: str, extra: List[str], out: Path, arrays: Dict[str, np.ndarray]) -> dict:
    cfg = load_config(None, TINY + extra)
    settings = validate_config(cfg).comm
    keras.utils.set_random_seed(7)
    model = build_and_compile(cfg, VOCAB, ctx)
    shapes = set_start(model)
    plant(model.optimizer, settings, ctx)
    stats = out / f"comm_stats_{name}_rank{ctx.rank}.json"
    callbacks = comm.comm_callbacks(settings, ctx, log=lambda _m: None, stats_path=stats)
    losses = StepLosses()
    src, tin, tout = rank_batches(ctx.rank)
    data = tf.data.Dataset.from_tensor_slices(({"source": src, "target_in": tin}, tout))
    model.fit(data.batch(BATCH), epochs=1, shuffle=False, verbose=0,
              callbacks=callbacks + [losses])
    for i, weight in enumerate(model.weights):
        arrays[f"{name}/{i:03d}"] = np.asarray(weight, np.float64)
    opt = model.optimizer
    residuals = residual_variables(opt, model.trainable_variables)
    return {"losses": losses.losses(), "shapes": shapes,
            "names": [variable_name(w) for w in model.weights],
            "iterations": int(opt.iterations.numpy()),
            "optimizer_class": type(opt).__name__,
            "exchange": type(exchange_of(opt)).__name__,
            "residual_norm": float(np.sqrt(sum(float(np.sum(np.square(r.numpy())))
                                               for r in residuals))),
            "residuals": len(residuals), "trainable": len(model.trainable_variables),
            "record": json.loads(stats.read_text())}


def resume_scenarios(ctx, out: Path) -> dict:
    from tests.helpers import write_toy_data_dir  # noqa: PLC0415
    from tests.parallel.workers.resume import run_mode  # noqa: PLC0415
    from tf_nmt.data.data_dir import ensure_vocab  # noqa: PLC0415

    data = write_toy_data_dir(out / f"data{ctx.rank}")  # per rank: no races on the files
    ensure_vocab(data, 320, log=lambda _m: None)
    return {f"resume_{mode}": run_mode(ctx, out / "resume", data, mode) for mode in RESUME_MODES}


def work(ctx, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    arrays: Dict[str, np.ndarray] = {}
    res = {"keras": keras_name(), "keras_version": KERAS_VERSION,
           "env": os.environ.get("TF_NMT_KERAS"), "planted": os.environ.get(PLANT_VAR, "")}
    for name, extra in SCENARIOS.items():
        print(f"[rank {ctx.rank}] keras {KERAS_VERSION} {name}", flush=True)
        res[name] = scenario(ctx, name, extra, out, arrays)
    if KERAS_VERSION == 3 and not res["planted"]:
        print(f"[rank {ctx.rank}] keras {KERAS_VERSION} resume", flush=True)
        res.update(resume_scenarios(ctx, out))
    np.savez(out / f"rank{ctx.rank}.npz", **arrays)
    return res


if __name__ == "__main__":
    run_rank(work)
