"""Worker for tests/parallel/test_time_budget.py: run under ``horovodrun -np 2``.

Every rank trains the same tiny run with a time budget far shorter than its step count and a
timed cool-down; it writes the step it stopped at and the learning rates it logged.

The budget's clock counts steps, not seconds, so the outcome does not depend on machine speed:
rank r's clock advances SECONDS_PER_STEP[r] per optimizer step (different per rank, as two
machines' clocks would). Alone, rank 0 would stop after step 225 and rank 1 after 90; on the
agreed (mean) clock, 0.35 s a step, both stop at the first agreement point past 45 s.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # repo root, when not installed

from tests.helpers import write_toy_data_dir  # noqa: E402
from tests.parallel.workers import run_rank  # noqa: E402
from tf_nmt import distributed  # noqa: E402
from tf_nmt.config import load_config  # noqa: E402
from tf_nmt.training import callbacks  # noqa: E402
from tf_nmt.data.data_dir import ensure_vocab  # noqa: E402
from tf_nmt.training.trainer import train  # noqa: E402

TINY = ["model.kind=transformer", "model.num_layers=1", "model.d_model=16", "model.num_heads=2",
        "model.ff_dim=32", "data.vocab_size=320", "data.batch_tokens=256",
        "train.train_steps=1000000", "train.steps_per_cycle=20", "train.log_every=5",
        "train.time_budget_minutes=0.75", "train.cooldown_fraction=1.0"]
SECONDS_PER_STEP = (0.2, 0.5)  # per rank; the mean, 0.35 s, reaches 45 s after step 128.6


def step_clock(rank: int):
    """TimeBudget whose clock is rank ``rank``'s step count times its seconds per step."""

    class StepClockBudget(callbacks.TimeBudget):
        def _now(self) -> float:
            return SECONDS_PER_STEP[rank] * int(self.model.optimizer.iterations.numpy())

    return StepClockBudget


def work(ctx, out: Path) -> dict:
    data = write_toy_data_dir(out / f"data{ctx.rank}")  # per rank: no races on the files
    ensure_vocab(data, 320, log=lambda _m: None)  # the same corpus: the same vocabulary
    callbacks.TimeBudget = step_clock(ctx.rank)  # the trainer builds cb.TimeBudget(...)
    result = train(load_config(None, TINY + [f"data.data_dir={data}"]), out / "run",
                   log=lambda _m: None)
    distributed.barrier(ctx)  # both ranks got here: nothing hung
    return {"final_step": result.final_step, "stopped": result.stopped_by_time_budget,
            "lr": [[h["step"], h["lr"]] for h in result.history]}


if __name__ == "__main__":
    run_rank(work)
