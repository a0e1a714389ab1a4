"""Worker for tests/parallel/test_own_corpus.py: run under ``horovodrun -np 2``.

Each rank reads its share of the own corpus the test wrote to ``<out>/data`` (5 shards, which
2 ranks do not divide) and records the blocks and pairs it holds, trains the same tiny en->fr
run for a few steps on them (recording the blocks the trainer streams) (``<out>/run``), and
trains on a corpus of 1 shard (``<out>/one-shard``), which the ranks split, and trains the first
run again stopped at step 2 and resumed (``<out>/split``). Writes ``<out>/rank<r>.json``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # repo root, when not installed

from tests.parallel.workers import run_rank  # noqa: E402
from tf_nmt.config import load_config  # noqa: E402
from tf_nmt.compat import tf  # noqa: E402
from tf_nmt.data.prepared import decode_record, read_prepared  # noqa: E402
from tf_nmt.data.streaming import block_pairs  # noqa: E402
from tf_nmt.training import trainer  # noqa: E402
from tf_nmt.training.trainer import train  # noqa: E402

STEPS = 4
TINY = ["model.kind=transformer", "model.num_layers=1", "model.d_model=16", "model.num_heads=2",
        "model.ff_dim=32", "model.dropout=0.0", "data.batch_tokens=256",
        "data.shuffle_buffer=32", "train.steps_per_cycle=2", "train.log_every=2",
        "train.warmup_steps=2", "train.seed=7", f"train.train_steps={STEPS}"]


def described(blocks) -> list:
    return [[b.path.name, b.start, b.count] for b in blocks]


def work(ctx, out: Path) -> dict:
    data = out / "data"
    blocks = read_prepared(data).rank_blocks(ctx.size, ctx.rank, block_pairs(32))
    pairs = [list(map(list, decode_record(record))) for b in blocks for record in
             tf.data.TFRecordDataset(str(b.path)).skip(b.start).take(b.count).as_numpy_iterator()]
    lines, streamed = [], []
    stream = trainer.rank_stream

    def recording(rank_blocks, *args, **kwargs):  # what the trainer streams
        streamed.append(described(rank_blocks))
        return stream(rank_blocks, *args, **kwargs)

    trainer.rank_stream = recording
    log = lines.append if ctx.is_chief else (lambda _m: None)
    result = train(load_config(None, TINY + [f"data.data_dir={data}"]), out / "run", log=log)
    one_shard = train(load_config(None, TINY + [f"data.data_dir={out / 'one-shard'}"]),
                      out / "one-shard-run", log=log)
    # the same run interrupted at step 2 and resumed: each rank starts after its own batch
    split = TINY[:-1] + [f"data.data_dir={data}"]
    first = train(load_config(None, split + ["train.train_steps=2"]), out / "split", log=log)
    second = train(load_config(None, split + [f"train.train_steps={STEPS}"]), out / "split",
                   log=log)
    return {"blocks": described(blocks), "streamed": streamed, "pairs": pairs,
            "final_step": result.final_step, "one_shard_final_step": one_shard.final_step,
            "losses": [h["loss"] for h in result.history], "log": lines,
            "split_losses": [h["loss"] for h in first.history + second.history],
            "resumed_from": second.resumed_from}


if __name__ == "__main__":
    run_rank(work)
