"""Worker for tests/parallel/test_bad_input.py: run under ``horovodrun -np 2``.

Every rank calls the real trainer twice with input it must refuse, before any collective:
* ``world_size`` — resuming a run directory whose meta.json says it was written by 1 worker;
* ``shards`` — a training split with fewer sentence pairs (1) than workers (2).
Each rank writes the errors it got (type and message) and what the run directory holds after.
"""
import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # repo root, when not installed

from tests.helpers import write_toy_data_dir  # noqa: E402
from tf_nmt import distributed  # noqa: E402
from tf_nmt.config import load_config  # noqa: E402
from tf_nmt.data.data_dir import ensure_vocab  # noqa: E402
from tf_nmt.run_dir import RunDir  # noqa: E402
from tf_nmt.training.trainer import run_meta, train  # noqa: E402

TINY = ["model.kind=transformer", "model.num_layers=1", "model.d_model=16", "model.num_heads=2",
        "model.ff_dim=32", "data.vocab_size=320", "data.batch_tokens=256", "train.train_steps=4"]


def attempt(cfg, run_dir: Path) -> dict:
    try:
        train(cfg, run_dir, log=lambda _m: None)
    except Exception as err:  # noqa: BLE001 - the test checks type and message
        return {"error": type(err).__name__, "message": str(err)}
    return {"error": None, "message": ""}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    ctx = distributed.init(enabled=True)
    base = Path(args.out)
    data = write_toy_data_dir(base / f"data{ctx.rank}")  # per rank: no races on the files
    cfg = load_config(None, TINY + [f"data.data_dir={data}"])
    tokenizer = ensure_vocab(data, 320, log=lambda _m: None)  # learned by this process alone

    run_dir = base / "run"
    meta_before = None
    if ctx.is_chief:
        run_dir.mkdir(parents=True, exist_ok=True)
        RunDir(run_dir).write_meta(run_meta(cfg, tokenizer, world_size=1))
    distributed.barrier(ctx)
    meta_before = (run_dir / "meta.json").read_text()
    world = attempt(cfg, run_dir)
    world["meta_unchanged"] = (run_dir / "meta.json").read_text() == meta_before
    world["files_after"] = sorted(p.name for p in run_dir.iterdir())

    tiny = base / f"tiny{ctx.rank}"
    for split in ("train", "dev", "test"):  # one pair per split; the same vocabulary
        for lang in ("en", "de"):
            text = (data / "corpus" / f"{split}.{lang}").read_text().splitlines()[0]
            (tiny / "corpus").mkdir(parents=True, exist_ok=True)
            (tiny / "corpus" / f"{split}.{lang}").write_text(text + "\n", encoding="utf-8")
    (tiny / "vocab").mkdir(parents=True, exist_ok=True)
    shutil.copy(data / "vocab" / "spm-320.model", tiny / "vocab" / "spm-320.model")
    shards = attempt(load_config(None, TINY + [f"data.data_dir={tiny}"]), base / "run_tiny")
    shards["has_checkpoint"] = RunDir(base / "run_tiny").has_checkpoint()

    distributed.barrier(ctx)  # both ranks got here: nothing hung
    result = {"rank": ctx.rank, "size": ctx.size, "world_size": world, "shards": shards}
    Path(base, f"rank{ctx.rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
