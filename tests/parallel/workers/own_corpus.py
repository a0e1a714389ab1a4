"""Worker for tests/parallel/test_own_corpus.py: run under ``horovodrun -np 2``.

Each rank reads its shards of the own corpus the test wrote to ``<out>/data`` (4 shards) and
records which files and pairs they hold, trains the same tiny en->fr run for a few steps on
them (recording the files the trainer streams) (``<out>/run``), and tries a corpus of 1 shard (``<out>/one-shard``), which both ranks must
refuse before writing anything. Writes ``<out>/rank<r>.json``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # repo root, when not installed

from tests.parallel.workers import run_rank  # noqa: E402
from tf_nmt.config import load_config  # noqa: E402
from tf_nmt.data.prepared import DataError, read_prepared  # noqa: E402
from tf_nmt.data.streaming import read_pairs  # noqa: E402
from tf_nmt.training import trainer  # noqa: E402
from tf_nmt.training.trainer import train  # noqa: E402

STEPS = 4
TINY = ["model.kind=transformer", "model.num_layers=1", "model.d_model=16", "model.num_heads=2",
        "model.ff_dim=32", "model.dropout=0.0", "data.batch_tokens=256",
        "data.shuffle_buffer=32", "train.steps_per_cycle=2", "train.log_every=2",
        "train.warmup_steps=2", "train.seed=7", f"train.train_steps={STEPS}"]


def work(ctx, out: Path) -> dict:
    data = out / "data"
    files = read_prepared(data).rank_shards(ctx.size, ctx.rank)
    pairs = [[s.numpy().tolist(), t.numpy().tolist()] for s, t in read_pairs(files, shuffle=False)]
    lines, streamed = [], []
    stream = trainer.make_shard_dataset

    def recording(shards, *args, **kwargs):  # what the trainer streams
        streamed.append([Path(f).name for f in shards])
        return stream(shards, *args, **kwargs)

    trainer.make_shard_dataset = recording
    log = lines.append if ctx.is_chief else (lambda _m: None)
    result = train(load_config(None, TINY + [f"data.data_dir={data}"]), out / "run", log=log)
    try:
        train(load_config(None, TINY + [f"data.data_dir={out / 'one-shard'}"]),
              out / "refused-run", log=log)
        refusal = None
    except DataError as err:
        refusal = str(err)
    return {"files": [f.name for f in files], "streamed": streamed, "pairs": pairs, "final_step": result.final_step,
            "losses": [h["loss"] for h in result.history], "log": lines, "refusal": refusal}


if __name__ == "__main__":
    run_rank(work)
