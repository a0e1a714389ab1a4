"""Worker for tests/parallel/test_exchange_sizes.py: run under ``horovodrun -np 2``.

Each rank computes the gradients of a tiny Transformer (tied and untied embedding) on a batch of
a rank-specific size, averages them with :func:`exchange_gradients` (sparse_as_dense off and on)
and with Horovod's own ``DistributedGradientTape``, and writes the sizes and values to
``<out>/rank<r>.json``; rank 0 also records a Horovod timeline of the exchanges.
"""
import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # repo root, when not installed
os.environ["HOROVOD_TIMELINE"] = "DYNAMIC"  # read by hvd.init(): lets rank 0 start a timeline

from tf_nmt import distributed  # noqa: E402
from tf_nmt.compat import keras, tf  # noqa: E402
from tf_nmt.distributed.comm.horovod import horovod_tape  # noqa: E402
from experiments.accumulation.horovod_traffic import exchange_gradients, measure  # noqa: E402
from tf_nmt.models import build_model  # noqa: E402
from tf_nmt.models.losses import label_smoothed_nll  # noqa: E402

VOCAB, DIM = 29, 8


def rank_batch(rank: int):
    """Rank r: 2 + r sentences, source length 5 + r, target length 4 (so slices differ)."""
    rng = tf.random.Generator.from_seed(100 + rank)
    rows = 2 + rank
    source = rng.uniform([rows, 5 + rank], 4, VOCAB, dtype=tf.int32)
    target = rng.uniform([rows, 5], 4, VOCAB, dtype=tf.int32)
    return {"source": source, "target_in": target[:, :-1]}, target[:, 1:]


def run(ctx, tie: bool, timeline: Path) -> dict:
    keras.utils.set_random_seed(3)
    model = build_model("transformer", VOCAB, num_layers=1, d_model=DIM, num_heads=2, ff_dim=16,
                        dropout=0.0, tie_embeddings=tie)
    x, y = rank_batch(ctx.rank)
    model(x)
    distributed.broadcast_variables(model.variables, ctx)

    def loss_value():
        return label_smoothed_nll(y, model(x, training=True), 0.1)[0]

    with tf.GradientTape() as tape:
        loss = loss_value()
    local = tape.gradient(loss, model.trainable_variables)
    names = [f"{i}:{v.name}" for i, v in enumerate(model.trainable_variables)]
    if ctx.is_chief and timeline is not None:
        ctx.hvd.start_timeline(str(timeline))
    off_avg, off = exchange_gradients(local, names, ctx.hvd, sparse_as_dense=False)
    if ctx.is_chief and timeline is not None:
        ctx.hvd.stop_timeline()
    on_avg, on = exchange_gradients(local, names, ctx.hvd, sparse_as_dense=True)
    reference = {}
    for flag in (False, True):
        with tf.GradientTape() as tape:
            loss = loss_value()
        grads = horovod_tape(tape, ctx, sparse_as_dense=flag).gradient(
            loss, model.trainable_variables)
        reference[str(flag)] = [tf.convert_to_tensor(g).numpy().ravel().tolist() for g in grads]
    dense = lambda gs: [tf.convert_to_tensor(g).numpy().ravel().tolist() for g in gs]  # noqa: E731
    emb = names.index(next(n for n in names if n.endswith(":embeddings:0")))
    return {"names": names, "embedding_index": emb,
            "looked_up_ids": int(tf.size(x["source"])) + int(tf.size(x["target_in"])),
            "local_dense": dense(local), "local_sizes": [measure(g).__dict__ for g in local],
            "off": [r.to_dict() for r in off], "on": [r.to_dict() for r in on],
            "off_avg": dense(off_avg), "on_avg": dense(on_avg),
            "tape_off": reference["False"], "tape_on": reference["True"],
            "off_result_index_dtype": (off_avg[emb].indices.dtype.name
                                       if isinstance(off_avg[emb], tf.IndexedSlices) else None)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    ctx = distributed.init(enabled=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {"rank": ctx.rank, "size": ctx.size,
              "untied": run(ctx, tie=False, timeline=out / "timeline.json"),
              "tied": run(ctx, tie=True, timeline=None)}
    Path(out, f"rank{ctx.rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
