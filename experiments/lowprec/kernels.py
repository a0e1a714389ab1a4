"""Table 7.5 on this CPU: log-space dot products against int8 and fp32 (thesis section 7.3.5).

Measures, at the C++ level (the ``LowprecBench*`` ops time their own loops, so TF's per-op cost
does not swamp a 128-element dot product):

* ns per 128-element dot product for fp32 FMA, int8 VNNI (``vpdpbusd``), 4-bit log with 16-bit
  shift and 4-bit log with 8-bit LUT: ``pairs`` independent dot products on an L1-resident
  working set, each producing its scalar (the horizontal sum is included);
* GFLOP/s-equivalent (2 M N K / time) of the same four kernels, one thread, on our models' matmul
  shapes for a batch of ``--tokens`` rows: the quickstart Transformer (d_model 256, ff 1024,
  vocab 8000) and the GNMT LSTM gates (units 256: [x; h] 512 -> 4 x 256). Weights are packed once
  outside the timing; each timed call packs the activations' codes and writes float outputs.
  ``tf.matmul`` in float32 (oneDNN/Eigen, timed from Python, so it includes the op dispatch)
  is given for reference, with ``--tf-threads`` intra- and inter-op threads (default 1, like
  the C++ loops). TensorFlow fixes its thread pools when it starts, so where it has already
  started in this process with other counts (as in ``python -m experiments lowprec``, which
  measures after training) the column is measured in a fresh subprocess instead; the thread
  counts the measuring process actually had are recorded under ``tf_matmul``.

The machine is shared and noisy, so the methods alternate within each round (the order rotates
from round to round). One sample of a method in a round is the best of ``--bursts`` short bursts
(about ``--seconds`` each, 0.2 ms: far shorter than a scheduler time slice, so the best burst is rarely
preempted); the table reports the median of these samples over rounds, and the ratios to fp32 are
computed per round. The load average before and after is recorded. Thesis figures (Cascade Lake)
are printed beside ours.

    python -m experiments lowprec-kernels                     # writes experiments/lowprec/results/lowprec_kernels.json
    python -m experiments lowprec-kernels --quick --out /tmp/lp.json   # seconds; numbers meaningless
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from experiments.lib import common
from tf_nmt.utils import machine

METHODS: Tuple[str, ...] = ("fp32", "int8", "shift16", "lut8")
LABELS: Dict[str, str] = {
    "fp32": "fp32 FMA",
    "int8": "int8 VNNI (vpdpbusd)",
    "shift16": "4-bit log, 16-bit shift",
    "lut8": "4-bit log, 8-bit LUT",
}
THESIS_NS: Dict[str, float] = {"fp32": 8.46, "int8": 2.08, "shift16": 3.90, "lut8": 2.52}
THESIS_CPU = "Intel Cascade Lake (thesis Table 7.5)"
# (name, K, N): y[tokens, N] = x[tokens, K] W[K, N]
SHAPES: Tuple[Tuple[str, int, int], ...] = (
    ("transformer attention projection", 256, 256),
    ("transformer ffn in", 256, 1024),
    ("transformer ffn out", 1024, 256),
    ("transformer output projection (vocab)", 256, 8000),
    ("gnmt lstm gates", 512, 1024),
)


def _calibrate(measure, target_s: float, start: int) -> int:
    """A repetition count for which one ``measure(reps)`` call takes about ``target_s``."""
    reps = start
    while True:
        t0 = time.perf_counter()
        measure(reps)
        elapsed = time.perf_counter() - t0
        if elapsed >= target_s / 4 or reps >= 1 << 30:
            return max(1, int(reps * target_s / max(elapsed, 1e-9)))
        reps *= 4


def _rotated(round_index: int) -> List[str]:
    k = round_index % len(METHODS)
    return list(METHODS[k:] + METHODS[:k])


def _summary(samples: List[float]) -> Dict[str, float]:
    qs = statistics.quantiles(samples, n=4) if len(samples) >= 2 else [samples[0]] * 3
    return {"median": statistics.median(samples), "p25": qs[0], "p75": qs[2], "min": min(samples)}


def bench_dots(rounds: int, pairs: int, target_s: float, bursts: int, impl: str = "auto") -> Dict[str, Any]:
    """ns per 128-element dot product per method; the methods alternate within each round, and
    each sample is the best of ``bursts`` timed bursts."""
    from experiments.lowprec import bench_ops

    reps = {m: _calibrate(lambda r, m=m: bench_ops.bench_dot(m, pairs, r, impl), target_s, 64)
            for m in METHODS}
    ns: Dict[str, List[float]] = {m: [] for m in METHODS}
    for r in range(rounds):
        for m in _rotated(r):
            ns[m].append(min(bench_ops.bench_dot(m, pairs, reps[m], impl) for _ in range(bursts)))
    ratios = {m: [ns["fp32"][r] / ns[m][r] for r in range(rounds)] for m in METHODS}
    return {
        "pairs": pairs, "k": 128, "impl": impl, "reps": reps, "bursts": bursts, "ns_per_dot": ns,
        "summary": {m: {**_summary(ns[m]), "speedup_vs_fp32_median": statistics.median(ratios[m])}
                    for m in METHODS},
    }


def _tf_matmul_ns(m: int, k: int, n: int, target_s: float, rounds: int, bursts: int) -> List[float]:
    """ns per eager tf.matmul (float32) of [m, k] x [k, n]: per round the best burst."""
    import numpy as np

    from tf_nmt.compat import tf

    rng = np.random.default_rng(0)
    a = tf.constant(rng.standard_normal((m, k)).astype(np.float32))
    b = tf.constant(rng.standard_normal((k, n)).astype(np.float32))

    def measure(reps: int) -> float:
        t0 = time.perf_counter()
        for _ in range(reps):
            y = tf.linalg.matmul(a, b)
        y.numpy()
        return (time.perf_counter() - t0) * 1e9 / reps

    reps = _calibrate(measure, target_s, 4)
    return [min(measure(reps) for _ in range(bursts)) for _ in range(rounds)]


def current_tf_threads() -> Dict[str, int]:
    """The intra- and inter-op thread counts TensorFlow runs with in this process (0: its
    default, one per logical CPU)."""
    from tf_nmt.compat import tf

    return {"intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads()}


def set_tf_threads(threads: int) -> bool:
    """Give TensorFlow ``threads`` intra- and inter-op threads in this process; False (and
    nothing changed) where it has already started with other counts, which it cannot change."""
    from tf_nmt.compat import tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:  # "cannot be modified after initialization"
        return False
    return current_tf_threads() == {"intra_op_threads": threads, "inter_op_threads": threads}


def _measure_tf_column(shapes: Sequence[Tuple[str, int, int]], tokens: int, target_s: float,
                       rounds: int, bursts: int) -> Dict[str, Any]:
    """The tf.matmul column in this process, with the thread counts it ran with."""
    ns = {name: _tf_matmul_ns(tokens, k, n, target_s, rounds, bursts) for name, k, n in shapes}
    return {**current_tf_threads(), "ns": ns}


def _tf_column_worker() -> None:
    """Entry point of the subprocess of :func:`tf_matmul_column`: the job as JSON on stdin,
    the result as one JSON line on stdout. Sets the thread counts before TensorFlow starts."""
    job = json.loads(sys.stdin.read())
    if not set_tf_threads(job["threads"]):
        raise SystemExit(f"could not give TensorFlow {job['threads']} threads: {current_tf_threads()}")
    out = _measure_tf_column([tuple(s) for s in job["shapes"]], job["tokens"], job["target_s"],
                             job["rounds"], job["bursts"])
    print("TF_MATMUL_RESULT " + json.dumps(out), flush=True)


def tf_matmul_column(threads: int, shapes: Sequence[Tuple[str, int, int]], tokens: int,
                     target_s: float, rounds: int, bursts: int) -> Dict[str, Any]:
    """ns per tf.matmul on each shape with TensorFlow on ``threads`` intra- and inter-op
    threads: in this process where TensorFlow can still be given them, otherwise in a fresh
    subprocess. Returns ``{"intra_op_threads", "inter_op_threads", "measured_in", "ns"}``, the
    counts read back from the process that measured; raises if they are not ``threads``."""
    if threads < 1:
        raise ValueError(f"TensorFlow threads must be >= 1, got {threads}")
    if set_tf_threads(threads):
        out = {**_measure_tf_column(shapes, tokens, target_s, rounds, bursts),
               "measured_in": "this process"}
    else:
        job = {"threads": threads, "shapes": [list(s) for s in shapes], "tokens": tokens,
               "target_s": target_s, "rounds": rounds, "bursts": bursts}
        root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
        proc = subprocess.run(
            [sys.executable, "-c",
             "from experiments.lowprec.kernels import _tf_column_worker; _tf_column_worker()"],
            input=json.dumps(job), capture_output=True, text=True, env=env, cwd=root)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("TF_MATMUL_RESULT ")]
        if proc.returncode != 0 or not lines:
            raise RuntimeError(f"the tf.matmul subprocess failed ({proc.returncode}):\n"
                               f"{(proc.stdout + proc.stderr)[-3000:]}")
        out = {**json.loads(lines[-1][len("TF_MATMUL_RESULT "):]),
               "measured_in": "a subprocess (TensorFlow had already started in this one)"}
    got = (out["intra_op_threads"], out["inter_op_threads"])
    if got != (threads, threads):
        raise RuntimeError(f"tf.matmul ran with {got} intra/inter-op threads, not {threads}")
    return out


def bench_matmuls(rounds: int, tokens: int, target_s: float, bursts: int,
                  with_tf: bool = True, tf_threads: int = 1,
                  shapes: Sequence[Tuple[str, int, int]] = SHAPES,
                  ) -> Tuple[List[Dict[str, Any]], Optional[Dict[str, Any]]]:
    """GFLOP/s-equivalent of the four kernels (one thread) on the models' matmul shapes, and
    the ``tf.matmul`` reference column (:func:`tf_matmul_column`; None without ``with_tf``)."""
    from experiments.lowprec import bench_ops

    out = []
    for name, k, n in shapes:
        m = tokens
        flops = 2.0 * m * k * n
        reps = {meth: _calibrate(lambda r, meth=meth: bench_ops.bench_matmul(meth, m, k, n, r), target_s, 1)
                for meth in METHODS}
        ns: Dict[str, List[float]] = {meth: [] for meth in METHODS}
        for r in range(rounds):
            for meth in _rotated(r):
                ns[meth].append(min(bench_ops.bench_matmul(meth, m, k, n, reps[meth]) for _ in range(bursts)))
        out.append({
            "shape": name, "m": m, "k": k, "n": n, "flops": flops, "reps": reps, "ns": ns,
            "gflops_median": {meth: flops / statistics.median(ns[meth]) for meth in METHODS},
            "speedup_vs_fp32_median": {
                meth: statistics.median(ns["fp32"][r] / ns[meth][r] for r in range(rounds))
                for meth in METHODS},
        })
    if not with_tf:
        return out, None
    column = tf_matmul_column(tf_threads, shapes, tokens, target_s, rounds, bursts)
    for row in out:
        tf_ns = column["ns"][row["shape"]]
        row["tf_matmul_fp32_ns"] = tf_ns
        row["gflops_median"]["tf_matmul_fp32"] = row["flops"] / statistics.median(tf_ns)
    return out, {k: v for k, v in column.items() if k != "ns"}


def format_tables(result: Dict[str, Any]) -> str:
    dots = result["dot"]["summary"]
    lines = [f"128-element dot product, ns (median over {result['rounds']} alternating rounds of the "
             f"best of {result['bursts']} bursts, {result['cpu']}, 1 thread)",
             f"{'method':<26}{'ours':>8}{'p25-p75':>16}{'x fp32':>8}{'thesis':>9}{'x fp32':>8}"]
    for m in METHODS:
        s = dots[m]
        lines.append(f"{LABELS[m]:<26}{s['median']:>8.2f}{s['p25']:>8.2f}-{s['p75']:<7.2f}"
                     f"{s['speedup_vs_fp32_median']:>8.2f}{THESIS_NS[m]:>9.2f}"
                     f"{THESIS_NS['fp32'] / THESIS_NS[m]:>8.2f}")
    if result.get("dot_scalar"):
        lines.append("scalar fallback, ns: " + ", ".join(
            f"{m} {result['dot_scalar'][m]:.1f}" for m in METHODS))
    if result.get("matmul"):
        lines.append("")
        lines.append(f"GFLOP/s-equivalent, [{result['tokens']} x K] x [K x N], C++ kernels on 1 thread, "
                     f"tf.matmul on {(result.get('tf_matmul') or {}).get('intra_op_threads', '-')} (median)")
        head = f"{'shape':<40}{'K':>6}{'N':>6}" + "".join(f"{m:>9}" for m in METHODS)
        has_tf = "tf_matmul_fp32" in result["matmul"][0]["gflops_median"]
        threads = (result.get("tf_matmul") or {}).get("intra_op_threads")
        label = f"tf {threads}thr" if threads else "tf fp32"
        lines.append(head + (f"{label:>9}" if has_tf else ""))
        for row in result["matmul"]:
            g = row["gflops_median"]
            line = f"{row['shape']:<40}{row['k']:>6}{row['n']:>6}" + "".join(f"{g[m]:>9.1f}" for m in METHODS)
            lines.append(line + (f"{g['tf_matmul_fp32']:>9.1f}" if has_tf else ""))
    lines.append(f"load average before {result['loadavg_before']}, after {result['loadavg_after']}")
    return "\n".join(lines)


def _write_json(path: Path, payload: Dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1) + "\n")
    os.replace(tmp, path)


def run(rounds: int, matmul_rounds: int, tokens: int, pairs: int, target_s: float, bursts: int,
        with_tf: bool = True, scalar: bool = True, tf_threads: int = 1) -> Dict[str, Any]:
    """All measurements as one JSON-ready dict. The C++ timing loops run on one thread; the
    ``tf.matmul`` column on ``tf_threads`` TensorFlow threads, recorded under ``tf_matmul``."""
    from experiments.lowprec import bench_ops
    from tf_nmt.ops import lowprec

    if tf_threads < 1:
        raise ValueError(f"TensorFlow threads must be >= 1, got {tf_threads}")
    # Before anything starts TensorFlow here: a standalone run then times tf.matmul in-process.
    if with_tf and matmul_rounds > 0:
        set_tf_threads(tf_threads)
    load_before = [round(v, 2) for v in os.getloadavg()]
    started = time.time()
    result: Dict[str, Any] = {
        "what": "Table 7.5 equivalent: log-space dot products vs int8 and fp32 (C++ timing loops)",
        "cpu": machine.cpu_model(), "cores": os.cpu_count(), "simd": lowprec.simd_available(),
        "forced_scalar_env": os.environ.get(lowprec.FORCE_SCALAR_ENV, ""),
        "rounds": rounds, "matmul_rounds": matmul_rounds, "tokens": tokens,
        "target_seconds_per_burst": target_s, "bursts": bursts, "loadavg_before": load_before,
        "thesis": {"cpu": THESIS_CPU, "ns_per_dot": THESIS_NS},
        "lut8_table": list(lowprec.LUT8_TABLE),
        "cpp_kernel_threads": 1,
    }
    result["dot"] = bench_dots(rounds, pairs, target_s, bursts)
    if scalar:
        result["dot_scalar"] = {
            m: min(bench_ops.bench_dot(m, pairs, max(1, result["dot"]["reps"][m] // 50), "scalar")
                   for _ in range(bursts)) for m in METHODS}
    if matmul_rounds > 0:
        result["matmul"], result["tf_matmul"] = bench_matmuls(
            matmul_rounds, tokens, target_s, bursts, with_tf, tf_threads)
    result["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
    result["seconds"] = round(time.time() - started, 1)
    result["complete"] = True
    return result


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=101, help="alternating rounds for the dot products")
    p.add_argument("--matmul-rounds", type=int, default=9, help="rounds per matmul shape (0: skip)")
    p.add_argument("--tokens", type=int, default=64, help="rows M of the activation matrix")
    p.add_argument("--pairs", type=int, default=16, help="independent dot products per pass")
    p.add_argument("--seconds", type=float, default=0.0002, help="target time of one burst")
    p.add_argument("--bursts", type=int, default=9, help="bursts per sample (the best is kept)")
    p.add_argument("--no-tf", action="store_true", help="skip the tf.matmul reference column")
    p.add_argument("--tf-threads", type=int, default=1,
                   help="TensorFlow intra- and inter-op threads for the tf.matmul column")
    p.add_argument("--quick", action="store_true", help="tiny run to check the pipeline")
    p.add_argument("--out", type=Path, default=common.results_path(__file__, "lowprec_kernels.json"))
    args = p.parse_args(list(argv) if argv is not None else None)
    if args.quick:
        args.rounds, args.matmul_rounds, args.seconds, args.bursts = 3, 1, 0.0005, 2
    if args.tf_threads < 1:
        p.error("--tf-threads must be >= 1")
    result = run(args.rounds, args.matmul_rounds, args.tokens, args.pairs, args.seconds,
                 args.bursts, with_tf=not args.no_tf, scalar=True, tf_threads=args.tf_threads)
    result["command"] = common.command_line("lowprec-kernels", argv)
    print(format_tables(result))
    common.write_result(args.out, result, overwrite=True)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
