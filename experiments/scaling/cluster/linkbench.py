"""Allreduce bandwidth probe, run as every rank of a Horovod job (``python -m
experiments.scaling.cluster.linkbench --out result.json``): times ``--repeats`` allreduces of a float32 tensor
of ``--megabytes`` and rank 0 writes the times and the implied bus bandwidth; then as many
allreduces of a single float32 (``small_median_s``: one collective's fixed cost, latency and
Horovod's cycle, with next to no bytes). Each tensor keeps its name over the repeats, as a
training step's gradients do, so Horovod's response cache serves all but the untimed first.

A ring allreduce of S bytes over N ranks sends ``2 (N-1)/N * S`` bytes per rank, so
``busbw = 2 (N-1)/N * S / t`` is comparable with the link rate.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import List, Optional

from tf_nmt.distributed.accounting import ring_allreduce_bytes, tensor_bytes


def bus_bandwidth_bits(size_bytes: int, world: int, seconds: float) -> float:
    """Ring-allreduce bus bandwidth in bit/s (0 for a single rank)."""
    if seconds <= 0:
        raise ValueError(f"time must be positive, got {seconds}")
    return 8.0 * ring_allreduce_bytes(size_bytes, world) / seconds


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--megabytes", type=float, default=16.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    from tf_nmt import distributed  # noqa: PLC0415
    from tf_nmt.compat import tf  # noqa: PLC0415

    ctx = distributed.init(enabled=True)
    hvd = ctx.hvd
    n = int(args.megabytes * 1e6 // 4)
    x = tf.ones([n], tf.float32) * float(ctx.rank + 1)
    hvd.allreduce(x, op=hvd.Sum, name="probe")  # connection set-up, not timed
    times = []
    for i in range(args.repeats):
        distributed.barrier(ctx)
        t0 = time.perf_counter()
        y = hvd.allreduce(x, op=hvd.Sum, name="probe")
        _ = y[0].numpy()
        times.append(time.perf_counter() - t0)
    small = tf.ones([1], tf.float32)
    hvd.allreduce(small, op=hvd.Sum, name="small")  # its first time is negotiated in full
    small_times = []
    for _ in range(args.repeats):
        distributed.barrier(ctx)
        t0 = time.perf_counter()
        _ = hvd.allreduce(small, op=hvd.Sum, name="small").numpy()
        small_times.append(time.perf_counter() - t0)
    expected = ctx.size * (ctx.size + 1) / 2
    if abs(float(y[0]) - expected) > 1e-3:
        raise RuntimeError(f"allreduce returned {float(y[0])}, expected {expected}")
    if ctx.rank == 0:
        med = statistics.median(times)
        size = tensor_bytes([n], "float32")
        result = {"world": ctx.size, "bytes": size, "times_s": times, "median_s": med,
                  "bus_bandwidth_bits": bus_bandwidth_bits(size, ctx.size, med),
                  "small_times_s": small_times, "small_median_s": statistics.median(small_times)}
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=2))
        tmp.replace(args.out)


if __name__ == "__main__":
    main()
