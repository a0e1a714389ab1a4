"""Sync vs async vs async + K-way global accumulation (K = number of workers), Transformer and
LSTM, over a learning-rate sweep; optionally artificial staleness for the synchronous runs.
Every run is ``tf-nmt train-async`` (a local parameter-server cluster) in a subprocess, then
``tf-nmt evaluate`` on the dev set. Writes ``results/async.json`` and prints a table.

    .venv/bin/python scripts/async_experiment.py --workers 4 --updates 2000 \\
        --lrs 0.0005,0.001,0.002 --kinds transformer,gnmt
    .venv/bin/python scripts/async_experiment.py --tiny --output /tmp/async-tiny.json

Modes (same number of *updates* U for each):
  sync       k = N pushes per update, rounds of N waited for (synchronous SGD over N workers)
  async      k = 1: every push is an update (so for U updates it computes N times fewer
             gradients than sync; the comparison is per update)
  async+acc  k = N without rounds: one update per N pushes from whichever workers pushed
  sync+stale k = N rounds with gradients on parameters pulled every ``--stale-u`` updates

The server sums the K pushed gradients (no division by K), so with K > 1 the step is K times
that of one gradient, as in synchronous SGD with a summed (not averaged) gradient. ``--tiny`` is
a minutes-long smoke setting whose numbers mean nothing.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KIND_SETTINGS = {
    "transformer": ["model.kind=transformer"],
    "gnmt": ["model.kind=gnmt", "train.schedule=constant"],
}
TINY = {"transformer": ["model.num_layers=1", "model.d_model=32", "model.num_heads=2",
                        "model.ff_dim=64", "model.dropout=0.0"],
        "gnmt": ["model.num_layers=2", "model.units=32", "model.dropout=0.0"]}


def tf_nmt(*args: str) -> None:
    cmd = [sys.executable, "-m", "tf_nmt", *args]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)


def sets(values: Sequence[str]) -> List[str]:
    return [item for value in values for item in ("--set", value)]


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=ROOT / "data_cache")
    ap.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "async")
    ap.add_argument("--output", type=Path, default=ROOT / "results" / "async.json")
    ap.add_argument("--overwrite", action="store_true")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--updates", type=int, default=2000)
    ap.add_argument("--lrs", default="0.0005,0.001,0.002")
    ap.add_argument("--kinds", default="transformer,gnmt")
    ap.add_argument("--modes", default="sync,async,async+acc,sync+stale")
    ap.add_argument("--stale-u", type=int, default=4, help="U for sync+stale")
    ap.add_argument("--dev-limit", type=int, default=500)
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args(argv)
    if args.tiny:
        args.workers, args.updates = min(args.workers, 2), min(args.updates, 20)
        args.dev_limit = min(args.dev_limit, 30)
    for path in (args.output, args.work_dir):
        if path.exists() and not args.overwrite:
            raise SystemExit(f"{path} exists; pass --overwrite to replace it")
    if args.work_dir.exists():
        shutil.rmtree(args.work_dir)
    n = args.workers
    mode_args = {"sync": ["--k", str(n), "--synchronous"], "async": ["--k", "1"],
                 "async+acc": ["--k", str(n)],
                 "sync+stale": ["--k", str(n), "--synchronous", "--refresh-every", str(args.stale_u)]}
    runs: List[Dict[str, object]] = []
    start = time.perf_counter()
    for kind in args.kinds.split(","):
        for lr in [float(x) for x in args.lrs.split(",")]:
            for mode in args.modes.split(","):
                run = args.work_dir / f"{kind}-lr{lr:g}-{mode}"
                overrides = KIND_SETTINGS[kind] + (TINY[kind] if args.tiny else []) + [
                    f"train.peak_lr={lr}", f"train.train_steps={args.updates}"] + args.set
                t0 = time.perf_counter()
                tf_nmt("train-async", "--run-dir", str(run), "--data-dir", str(args.data_dir),
                       "--workers", str(n), *mode_args[mode], *sets(overrides))
                report = json.loads((run / "async.json").read_text())
                bleu = None
                if not report["diverged"]:
                    tf_nmt("evaluate", "--run-dir", str(run), "--split", "dev", "--limit",
                           str(args.dev_limit), "--output-json", str(run / "dev.json"))
                    bleu = json.loads((run / "dev.json").read_text())["bleu"]
                runs.append({"kind": kind, "lr": lr, "mode": mode, "workers": n,
                             "k": report["k"], "updates": report["updates"],
                             "pushes": report["pushes"], "final_loss": report["final_loss"],
                             "diverged": report["diverged"], "dev_bleu": bleu,
                             "staleness_mean": report["mean"], "staleness_max": report["max"],
                             "staleness_histogram": report["histogram"],
                             "train_seconds": report["seconds"],
                             "wall_seconds": time.perf_counter() - t0})
    payload = {"experiment": "async SGD with global accumulation (issue 8)",
               "tiny_smoke_setting": bool(args.tiny),
               "settings": {"workers": n, "updates": args.updates, "lrs": args.lrs,
                            "stale_u": args.stale_u, "dev_limit": args.dev_limit,
                            "overrides": args.set, "engine": "tf.distribute ParameterServerStrategy, "
                            "1 ps + N worker server processes on 127.0.0.1"},
               "runs": runs, "wall_seconds": time.perf_counter() - start}
    from tf_nmt.training.trainer import write_json_atomic

    write_json_atomic(args.output, payload)
    print(f"\n{'kind':<12} {'lr':>8} {'mode':<11} {'k':>3} {'final loss':>10} {'dev BLEU':>8} "
          f"{'stale mean':>10} {'stale max':>9}")
    for r in runs:
        bleu = "diverged" if r["diverged"] else f"{r['dev_bleu']:.2f}"
        print(f"{r['kind']:<12} {r['lr']:>8g} {r['mode']:<11} {r['k']:>3} {r['final_loss']:>10.4f} "
              f"{bleu:>8} {r['staleness_mean']:>10.2f} {r['staleness_max']:>9}")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
