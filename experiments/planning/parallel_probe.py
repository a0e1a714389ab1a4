"""How many ranks' GradDrop exchanges this machine runs at once at full speed (issue 58).

``tf_nmt.planning.model.Cpu.graddrop_parallel``. GradDrop's selection streams the whole gradient
and its residual through memory, so ranks that share a node slow each other down sooner than
their cores would say: on the 2-core development host two single-threaded processes each take
about twice as long as one alone, where plain Python arithmetic runs at full speed in both.

K processes (one per core, single-threaded, as the emulated hosts' ranks run) each build the
validated model and time GradDrop's exchange of a fixed gradient of it (a local gather, as
:func:`tf_nmt.planning.probe.probe_cpu`): first each alone in its own time slot while the others
sleep, then all together, every call started at the same instant. Then

    graddrop_parallel = K * median(alone) / median(together)

(K when they do not slow each other down, 1 when they take turns).

    python -m experiments.planning.parallel_probe --processes 2   # prints the record
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

#: calls timed alone and together per process; seconds between the together calls' starts
REPEATS = 21
PERIOD_S = 0.1
#: each process's slot for its calls alone
SLOT_S = 1.5


def _child(args: argparse.Namespace) -> None:
    import numpy as np  # noqa: PLC0415

    from tf_nmt.compat import tf  # noqa: PLC0415

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from experiments.scaling.cluster.modes import mode_overrides  # noqa: PLC0415
    from tf_nmt.config import load_config  # noqa: PLC0415
    from tf_nmt.distributed.comm.graddrop import GradDropExchange  # noqa: PLC0415
    from tf_nmt.distributed.comm.settings import CommSettings  # noqa: PLC0415
    from tf_nmt.training.trainer import build_model_for_training  # noqa: PLC0415

    cfg = load_config(overrides=[*json.loads(args.overrides), *mode_overrides("graddrop")])
    model = build_model_for_training(cfg, args.vocab_size, policy="float32")
    shapes = [v.shape for v in model.trainable_variables]
    rng = np.random.default_rng(args.index)
    grads = [tf.constant(rng.standard_normal(s.as_list()).astype(np.float32)) for s in shapes]
    residuals = [tf.Variable(tf.zeros(s)) for s in shapes]
    settings = CommSettings(mode="graddrop", drop_ratio=cfg.train.drop_ratio, drop_warmup_steps=0)
    exchange = GradDropExchange(settings, shapes, 1, dense_fallback=False)
    step = tf.constant(100, tf.int64)
    run = tf.function(lambda: exchange.exchange(grads, residuals, step))
    run()[0].numpy(), run()[0].numpy()  # trace, allocate
    work = Path(args.work)
    (work / f"ready-{args.index}").write_text("")
    start_file = work / "start"
    while not start_file.exists():
        time.sleep(0.01)
    start = float(start_file.read_text())

    def timed_at(instant: float) -> float:
        while time.time() < instant:  # spin: a sleep's wake-up is late by up to a millisecond
            pass
        t0 = time.perf_counter()
        run()[0].numpy()
        return time.perf_counter() - t0

    mine = start + args.index * SLOT_S
    alone = [timed_at(mine) for _ in range(REPEATS)]
    together_at = start + args.processes * SLOT_S
    together = [timed_at(together_at + k * PERIOD_S) for k in range(REPEATS)]
    Path(args.out).write_text(json.dumps({"alone_s": statistics.median(alone),
                                          "together_s": statistics.median(together),
                                          "entries": sum(int(s.num_elements()) for s in shapes)}))


def measure(processes: int, overrides: Sequence[str], vocab_size: int,
            timeout_s: float = 600.0) -> Dict[str, Any]:
    """The record: ``graddrop_parallel`` and what it was computed from."""
    if processes < 1:
        raise ValueError(f"processes must be >= 1, got {processes}")
    with tempfile.TemporaryDirectory(prefix="tfnmt-parallel-probe-") as tmp:
        work = Path(tmp)
        procs = []
        for i in range(processes):
            cmd = [sys.executable, "-m", "experiments.planning.parallel_probe", "--child",
                   "--index", str(i), "--processes", str(processes), "--work", tmp,
                   "--out", str(work / f"out-{i}.json"), "--overrides", json.dumps(list(overrides)),
                   "--vocab-size", str(vocab_size)]
            log = open(work / f"log-{i}.txt", "w")  # noqa: SIM115 - closed with the process
            procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log))
        deadline = time.time() + timeout_s

        def failed() -> RuntimeError:
            return RuntimeError("a probe process failed:\n" + "\n".join(
                (work / f"log-{i}.txt").read_text()[-2000:] for i in range(processes)))

        try:
            while not all((work / f"ready-{i}").exists() for i in range(processes)):
                if any(p.poll() not in (None, 0) for p, _ in procs) or time.time() > deadline:
                    raise failed()
                time.sleep(0.05)
            tmp_start = work / "start.tmp"
            tmp_start.write_text(repr(time.time() + 1.0))
            tmp_start.replace(work / "start")
            for p, _ in procs:
                if p.wait(timeout=max(1.0, deadline - time.time())) != 0:
                    raise failed()
        finally:
            for p, log in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
                log.close()
        runs: List[Dict[str, float]] = [json.loads((work / f"out-{i}.json").read_text())
                                        for i in range(processes)]
    alone = statistics.mean(r["alone_s"] for r in runs)
    together = statistics.mean(r["together_s"] for r in runs)
    return {"graddrop_parallel": processes * alone / together, "processes": processes,
            "threads_per_process": 1, "alone_s": alone, "together_s": together,
            "per_process": runs, "repeats": REPEATS}


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--work", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--overrides", default=None, help=argparse.SUPPRESS)
    p.add_argument("--vocab-size", type=int, default=8000)
    args = p.parse_args(argv)
    if args.child:
        _child(args)
        return 0
    from experiments.planning.validate import MODEL  # noqa: PLC0415

    overrides = json.loads(args.overrides) if args.overrides else MODEL
    print(json.dumps(measure(args.processes, overrides, args.vocab_size), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
