"""Benchmark the custom ops against baselines; writes ``experiments/ops/results/ops.json`` and prints a table.

GradDrop (R = 0.99, per tensor) is compared with a ``tf.math.top_k`` compressor and a pure-TF
sampled-threshold compressor; LogQuantize (4 bits, optimised scale: fit + encode) with the NumPy
reference (run chunk by chunk to keep memory moderate); both with a plain copy of the tensor
(the memory-bandwidth bound). Times are the median of a few runs after one warm-up.

Usage: python -m experiments ops [--sizes 1000000 100000000] [--out FILE]

GPU mode, ``--device gpu`` (needs a GPU and the library built with its CUDA kernels; writes
``experiments/ops/results/gpu.json`` unless ``--out`` says otherwise): every op on a float32 tensor resident on the
GPU, timed with ``tf.test.experimental.sync_devices()`` around each call, reported as time, as
effective bandwidth (bytes the op must read and write) and as a fraction of a device-to-device
copy of the same tensor (``copy_s / op_s``, the share of copy bandwidth the op reaches), plus
GradDrop against a ``tf.math.top_k`` compressor on the same GPU.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict

import numpy as np


import tf_nmt  # noqa: E402,F401
from tf_nmt import ops  # noqa: E402
from tf_nmt.compat import tf  # noqa: E402
from experiments.lib import common  # noqa: E402
from tests.ops import reference as ref  # noqa: E402

RATIO, BITS, SAMPLE_FRACTION = 0.99, 4, 0.001
TARGETS = {"graddrop_vs_topk": 10.0, "graddrop_copy_fraction": 0.30, "logquant_vs_numpy": 20.0}


def timed(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``fn`` (results forced to host) after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _block(outputs) -> None:  # eager CPU ops are synchronous; this just touches scalars
    for t in tf.nest.flatten(outputs):
        if hasattr(t, "numpy"):
            t.numpy() if t.shape.rank == 0 else None


def topk_compressor(g: tf.Tensor, r: tf.Tensor, k: int):
    """Per-tensor top-k (by |g + r|) compressor with error feedback."""
    total = tf.reshape(g + r, [-1])
    _, idx = tf.math.top_k(tf.abs(total), k=k, sorted=False)
    values = tf.gather(total, idx)
    residual = tf.tensor_scatter_nd_update(total, idx[:, None], tf.zeros_like(values))
    return idx, values, residual


@tf.function
def sampled_tf_compressor(g: tf.Tensor, r: tf.Tensor):
    """Pure-TF sampled threshold: sample |g + r|, take the R quantile, mask."""
    total = tf.reshape(g + r, [-1])
    n = tf.size(total, out_type=tf.int64)
    m = tf.maximum(tf.cast(tf.math.ceil(SAMPLE_FRACTION * tf.cast(n, tf.float64)), tf.int64), 16384)
    sample = tf.sort(tf.abs(tf.gather(total, tf.random.uniform([m], 0, n, tf.int64))))
    thr = sample[tf.cast(math.floor(RATIO * 1e6), tf.int64) * m // 1000000]
    mask = tf.abs(total) >= thr
    idx = tf.where(mask)[:, 0]
    return idx, tf.gather(total, idx), tf.where(mask, tf.zeros_like(total), total)


def numpy_fit_encode(x: np.ndarray, bits: int, chunk: int = 1 << 22):
    """The NumPy reference for LogQuantize fit + encode, processed in chunks."""
    a_max = 0.0
    for i in range(0, x.size, chunk):
        a = np.abs(x[i:i + chunk])
        a_max = max(a_max, float(a[np.isfinite(a)].max(initial=0.0)))
    scale = np.float32(a_max)
    for _ in range(10):
        num = den = 0.0
        for i in range(0, x.size, chunk):
            a = np.abs(x[i:i + chunk])
            c = ref.centres("log", ref.mag_index("log", a, float(scale), bits), bits).astype(np.float64)
            num += float(np.dot(c, a))
            den += float(np.dot(c, c))
        nxt = np.float32(num / den)
        if nxt == scale:
            break
        scale = nxt
    codes = np.empty(x.shape, np.uint8)
    for i in range(0, x.size, chunk):
        codes[i:i + chunk] = ref.encode("log", x[i:i + chunk], float(scale), bits)
    return codes, scale


def bench_size(n: int, repeats: int) -> Dict[str, float]:
    rng = np.random.default_rng(0)
    g_np = rng.standard_normal(n, dtype=np.float32)
    g = tf.constant(g_np)
    r = tf.constant(rng.standard_normal(n, dtype=np.float32) * np.float32(0.1))
    k = n - math.floor(RATIO * n)
    t: Dict[str, float] = {}
    t["copy_s"] = timed(lambda: tf.raw_ops.DeepCopy(x=g), repeats)
    t["graddrop_s"] = timed(lambda: _block(ops.grad_drop(g, r, RATIO, SAMPLE_FRACTION, seed=1)), repeats)
    t["tf_sampled_s"] = timed(lambda: _block(sampled_tf_compressor(g, r)), repeats)
    t["topk_s"] = timed(lambda: _block(topk_compressor(g, r, k)), max(1, repeats // 3))
    t["logquant_s"] = timed(lambda: _block(ops.log_quantize(g, BITS)), repeats)
    codes, scale = ops.log_quantize(g, BITS)
    start = time.perf_counter()
    np_codes, np_scale = numpy_fit_encode(g_np, BITS)
    t["logquant_numpy_s"] = time.perf_counter() - start
    t["logquant_codes_agree"] = float(np.mean(np_codes == codes.numpy()))
    t["logquant_scale_rel_diff"] = abs(float(scale) - float(np_scale)) / float(np_scale)
    t["graddrop_kept_fraction"] = float(ops.grad_drop(g, r, RATIO, SAMPLE_FRACTION)[0].shape[0]) / n
    t.update({
        "graddrop_vs_topk": t["topk_s"] / t["graddrop_s"],
        "graddrop_vs_tf_sampled": t["tf_sampled_s"] / t["graddrop_s"],
        "graddrop_copy_fraction": t["copy_s"] / t["graddrop_s"],
        "logquant_vs_numpy": t["logquant_numpy_s"] / t["logquant_s"],
        "logquant_copy_fraction": t["copy_s"] / t["logquant_s"],
    })
    return t


GPU_TARGETS = {"graddrop_copy_fraction": 0.5, "encode_copy_fraction": 0.5,
               "decode_copy_fraction": 0.5, "graddrop_vs_topk": 20.0}


def gpu_timed(fn: Callable[[], object], repeats: int) -> float:
    """Median device time of ``fn`` (all queued GPU work drained before and after each call)."""
    sync = tf.test.experimental.sync_devices
    fn()
    sync()
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def gpu_bench_size(n: int, repeats: int) -> Dict[str, float]:
    """Times (s), bandwidths (GB/s) and copy fractions of every op on n float32 values on the GPU."""
    rng = np.random.default_rng(0)
    with tf.device("/GPU:0"):
        g = tf.identity(tf.constant(rng.standard_normal(n, dtype=np.float32)))
        r = tf.identity(tf.constant(rng.standard_normal(n, dtype=np.float32) * np.float32(0.1)))
        codes, scale = ops.log_quantize(g, BITS)
        scale_f = float(scale)
        idx, val, res = ops.grad_drop(g, r, RATIO, SAMPLE_FRACTION, seed=1)
        small = tf.identity(codes)
        packed = ops.pack_nibbles(small)
        k = n - math.floor(RATIO * n)
        # name: (callable, bytes the op has to move at the least)
        cases = {
            "copy": (lambda: tf.raw_ops.DeepCopy(x=g), 8 * n),
            "graddrop": (lambda: ops.grad_drop(g, r, RATIO, SAMPLE_FRACTION, seed=1), 12 * n),
            "topk": (lambda: topk_compressor(g, r, k), 12 * n),
            "fit": (lambda: ops.LOG.fit_scale(g, BITS), 4 * n),
            "encode": (lambda: ops.LOG.encode(g, scale_f, BITS), 5 * n),
            "decode": (lambda: ops.LOG.decode(codes, scale_f, BITS), 5 * n),
            "quantize": (lambda: ops.log_quantize(g, BITS), 5 * n),
            "quantize_dequantize": (lambda: ops.log_quantize_dequantize(g, BITS), 8 * n),
            "pack_nibbles": (lambda: ops.pack_nibbles(small), n + n // 2),
            "unpack_nibbles": (lambda: ops.unpack_nibbles(packed, n), n + n // 2),
            "one_bit": (lambda: ops.one_bit_quantize(idx, val, res), 4 * n),
        }
        t: Dict[str, float] = {}
        for name, (fn, nbytes) in cases.items():
            reps = max(1, repeats // 3) if name == "topk" else repeats
            t[f"{name}_s"] = gpu_timed(fn, reps)
            t[f"{name}_gbps"] = nbytes / t[f"{name}_s"] / 1e9
        placed = ops.grad_drop(g, r, RATIO, SAMPLE_FRACTION, seed=1)[0].device
    if "GPU" not in placed:
        raise SystemExit(f"GradDrop ran on {placed}, not the GPU: is the library built with CUDA?")
    for name in cases:
        if name != "copy":
            t[f"{name}_copy_fraction"] = t["copy_s"] / t[f"{name}_s"]
    t["graddrop_vs_topk"] = t["topk_s"] / t["graddrop_s"]
    t["graddrop_kept_fraction"] = float(idx.shape[0]) / n
    return t


def gpu_main(args) -> None:
    from tf_nmt.ops import loader

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        raise SystemExit("--device gpu: TensorFlow sees no GPU; nothing measured, nothing written")
    if not loader.gpu_kernels_built():
        raise SystemExit(f"--device gpu: the ops library has no CUDA kernels ({loader.build_info()})")
    details = tf.config.experimental.get_device_details(gpus[0])
    results = {}
    for n in args.sizes:
        results[str(n)] = gpu_bench_size(n, args.repeats)
        print(f"done n={n}", flush=True)
    report = {
        "config": {"drop_ratio": RATIO, "sample_fraction": SAMPLE_FRACTION, "log_bits": BITS,
                   "log_mode": "optimised", "dtype": "float32", "device": "gpu",
                   "copy": "tf.raw_ops.DeepCopy on the GPU; *_copy_fraction = copy_s / op_s"},
        "machine": {"gpu": details.get("device_name"), "compute_capability": details.get("compute_capability"),
                    "gpus": len(gpus), "platform": platform.platform(), "tensorflow": tf.__version__,
                    "ops_build": loader.build_info()},
        "targets": GPU_TARGETS,
        "results": results,
        "targets_met": {f"{key}@{n}": res[key] >= target for n, res in results.items()
                        for key, target in GPU_TARGETS.items()},
    }
    out = args.out or common.results_path(__file__, "gpu.json")
    common.write_result(Path(out), report, overwrite=True)
    keys = sorted(k for k in next(iter(results.values())) if k.endswith(("_s", "_copy_fraction")))
    keys += ["graddrop_vs_topk", "graddrop_kept_fraction"]
    print(f"GPU: {details.get('device_name')}")
    print(f"{'metric':32s}" + "".join(f"{n:>16s}" for n in results))
    for key in keys:
        print(f"{key:32s}" + "".join(f"{res[key]:16.6f}" for res in results.values()))
    print(json.dumps(report["targets_met"]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 100_000_000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=None, help="default experiments/ops/results/ops.json (cpu), .../gpu.json (gpu)")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    args = parser.parse_args(argv)
    if args.device == "gpu":
        gpu_main(args)
        return 0
    args.out = args.out or common.results_path(__file__, "ops.json")
    results = {}
    for n in args.sizes:
        results[str(n)] = bench_size(n, args.repeats if n <= 10_000_000 else 3)
        print(f"done n={n}", flush=True)
    report = {
        "config": {"drop_ratio": RATIO, "sample_fraction": SAMPLE_FRACTION, "log_bits": BITS,
                   "log_mode": "optimised", "dtype": "float32"},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "tensorflow": tf.__version__,
                    "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count()},
        "targets": TARGETS,
        "results": results,
        "targets_met": {f"{key}@{n}": res[key] >= target for n, res in results.items()
                        for key, target in TARGETS.items()},
    }
    common.write_result(Path(args.out), report, overwrite=True)
    keys = ["copy_s", "graddrop_s", "tf_sampled_s", "topk_s", "logquant_s", "logquant_numpy_s",
            "graddrop_vs_topk", "graddrop_vs_tf_sampled", "graddrop_copy_fraction",
            "logquant_vs_numpy", "logquant_copy_fraction"]
    print(f"{'metric':28s}" + "".join(f"{n:>16s}" for n in results))
    for key in keys:
        print(f"{key:28s}" + "".join(f"{res[key]:16.4f}" for res in results.values()))
    print(json.dumps(report["targets_met"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
