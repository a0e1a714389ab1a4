"""Replays the CPU kernels' golden outputs (make_golden.py) through the CUDA kernels via the
stand-alone harness (harness_capi.cu.cc), bit for bit, then benchmarks the kernels on the GPU.

Needs only Python 3, NumPy and a GPU (PyTorch, if present, times torch.topk as a stand-in for
tf.math.top_k). On the device tool's machines, from the repository root:

    bash tests/gpu/standalone/build.sh            # or carry a build/standalone made here
    python3 tests/gpu/standalone/run_standalone.py --golden build/gpu_golden --out $OUT/kernels.json

Prints one line per failing case and a closing 'N passed, M failed'; exit status 1 on failures.
"""
from __future__ import annotations

import argparse
import ctypes as C
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
VP, I64, F32, I32 = C.c_void_p, C.c_int64, C.c_float, C.c_int
RAW = {0: np.float32, 1: np.uint16, 2: np.uint16}
BENCH_KEYS = ["copy", "graddrop", "encode", "decode", "fit", "quantize", "quantize_dequantize",
              "pack_nibbles", "unpack_nibbles"]
# bytes each op must move at the least, per element (float32 in, 1-byte codes)
BENCH_BYTES = {"copy": 8, "graddrop": 12, "encode": 5, "decode": 5, "fit": 4, "quantize": 5,
               "quantize_dequantize": 8, "pack_nibbles": 1.5, "unpack_nibbles": 1.5}


def load(path: str):
    lib = C.CDLL(path)
    sig = {
        "tfnmt_fit": [I32, I32, VP, I64, I32, I32, I32, C.POINTER(F32)],
        "tfnmt_encode": [I32, I32, VP, I64, F32, I32, VP],
        "tfnmt_decode": [I32, I32, VP, I64, F32, I32, VP, C.POINTER(I32)],
        "tfnmt_quantize": [I32, I32, VP, I64, I32, I32, I32, VP, VP, C.POINTER(F32)],
        "tfnmt_pack": [VP, I64, VP, C.POINTER(I32)],
        "tfnmt_unpack": [VP, I64, VP],
        "tfnmt_grad_drop": [I32, I32, C.POINTER(VP), C.POINTER(VP), C.POINTER(I64), F32, F32, I64,
                            I64, I64, I32, C.POINTER(VP), C.POINTER(VP), C.POINTER(I64),
                            C.POINTER(F32), C.POINTER(VP), C.POINTER(VP)],
        "tfnmt_free_host": [VP],
        "tfnmt_one_bit": [I32, VP, VP, I64, I64, VP, I64, VP, VP, VP, C.POINTER(I32)],
        "tfnmt_bench": [I64, I32, C.POINTER(C.c_double)],
    }
    for name, args in sig.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = None if name == "tfnmt_free_host" else I32
    return lib


def p(a: np.ndarray):
    return a.ctypes.data_as(VP)


def f32_bits(x: float) -> int:
    return int(np.float32(x).view(np.uint32))


def same(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    if a.shape != b.shape or a.dtype.itemsize != b.dtype.itemsize:
        return False
    view = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    return bool(np.array_equal(a.view(view), b.view(view)))


def describe(got: np.ndarray, want: np.ndarray) -> str:
    """How two same-shaped float arrays (float32, or raw 16-bit bits) differ: counts by kind."""
    got, want = np.ascontiguousarray(got).ravel(), np.ascontiguousarray(want).ravel()
    if got.shape != want.shape:
        return f"shape {got.shape} vs {want.shape}"
    if got.dtype == np.uint16:  # raw float16/bfloat16 bits: count and show the first difference
        diff = got != want
        if not diff.any():
            return "same"
        i = int(np.flatnonzero(diff)[0])
        return f"{int(diff.sum())}/{diff.size} differ (first at {i}: got {got[i]:#x} want {want[i]:#x})"
    gb, wb = got.view(np.uint32), want.view(np.uint32)
    fg, fw = got.view(np.float32), want.view(np.float32)
    nan_g, nan_w = np.isnan(fg), np.isnan(fw)
    diff = gb != wb
    if not diff.any():
        return "same"
    both_nan = diff & nan_g & nan_w
    zero_sign = diff & (fg == 0) & (fw == 0)
    other = diff & ~both_nan & ~zero_sign
    text = f"{int(diff.sum())}/{diff.size} differ: NaN payload {int(both_nan.sum())}, zero sign {int(zero_sign.sum())}, other {int(other.sum())}"
    if other.any():
        i = int(np.flatnonzero(other)[0])
        text += f" (first at {i}: got {gb[i]:#x} want {wb[i]:#x})"
    return text


def check(lib, case, arr) -> str:
    """'' when the GPU result equals the CPU kernel's, else what differs."""
    k, q = case["kind"], case["params"]
    a = {key: arr[name] for key, name in case["arrays"].items()}
    if k == "fit":
        s = F32()
        rc = lib.tfnmt_fit(q["codec"], q["dtype"], p(a["x"]), q["n"], q["bits"], q["mode"], q["iterations"], C.byref(s))
        return f"rc={rc}" if rc else ("" if f32_bits(s.value) == q["scale"] else
                                      f"scale {s.value!r} vs {np.uint32(q['scale']).view(np.float32)!r}")
    if k in ("quantize", "qdq"):
        s = F32()
        if k == "quantize":
            out = np.empty(q["n"], np.uint8)
            rc = lib.tfnmt_quantize(q["codec"], q["dtype"], p(a["x"]), q["n"], q["bits"], q["mode"], q["iterations"], p(out), None, C.byref(s))
            want = a["codes"]
        else:
            out = np.empty(q["n"], RAW[q["dtype"]])
            rc = lib.tfnmt_quantize(q["codec"], q["dtype"], p(a["x"]), q["n"], q["bits"], q["mode"], q["iterations"], None, p(out), C.byref(s))
            want = a["y"]
        if rc:
            return f"rc={rc}"
        if f32_bits(s.value) != q["scale"]:
            return f"scale {s.value!r}"
        return "" if same(out, want) else f"{int(np.sum(out != want))} outputs differ"
    if k == "encode":
        out = np.empty(q["n"], np.uint8)
        rc = lib.tfnmt_encode(q["codec"], q["dtype"], p(a["x"]), q["n"], q["scale"], q["bits"], p(out))
        return f"rc={rc}" if rc else ("" if same(out, a["codes"]) else f"{int(np.sum(out != a['codes']))} codes differ")
    if k == "decode":
        out = np.empty(q["n"], RAW[q["dtype"]])
        bad = I32()
        rc = lib.tfnmt_decode(q["codec"], q["dtype"], p(a["codes"]), q["n"], q["scale"], q["bits"], p(out), C.byref(bad))
        if rc:
            return f"rc={rc}"
        if q["bad"]:
            return "" if bad.value else "out-of-range code not flagged"
        return "bad flag set" if bad.value else ("" if same(out, a["y"]) else "values differ")
    if k == "nibbles":
        n = q["n"]
        packed = np.zeros((n + 1) // 2, np.uint8)
        bad = I32()
        rc = lib.tfnmt_pack(p(a["codes"]), n, p(packed), C.byref(bad))
        if rc:
            return f"rc={rc}"
        if q["bad"]:
            return "" if bad.value else "code >= 16 not flagged"
        if bad.value or not same(packed, a["packed"]):
            return "pack differs"
        codes = np.zeros(n, np.uint8)
        rc = lib.tfnmt_unpack(p(packed), n, p(codes))
        return f"rc={rc}" if rc else ("" if same(codes, a["codes"]) else "unpack differs")
    if k == "grad_drop":
        n, dt = q["tensors"], q["dtype"]
        gs = [a[f"g{t}"] for t in range(n)]
        rs = [a[f"r{t}"].copy() for t in range(n)]
        sizes = (I64 * n)(*[g.size for g in gs])
        in_place = q.get("in_place", True)  # out of place: the residual input must stay as it was
        new_res = [np.empty_like(r) for r in rs]
        old_res = [np.empty_like(r) for r in rs]
        counts, thr = (I64 * n)(), F32()
        idx_p, val_p = (VP * n)(), (VP * n)()
        rc = lib.tfnmt_grad_drop(dt, n, (VP * n)(*[p(g) for g in gs]), (VP * n)(*[p(r) for r in rs]), sizes,
                                 q["ratio"], q["fraction"], q["seed"], q["exact_below"], q["min_sample"],
                                 int(in_place), (VP * n)(*[p(x) for x in new_res]),
                                 (VP * n)(*[p(x) for x in old_res]), counts, C.byref(thr), idx_p, val_p)
        if rc:
            return f"rc={rc}"
        problems = []
        for t in range(n):
            c = counts[t]
            idx = np.ctypeslib.as_array(C.cast(idx_p[t], C.POINTER(C.c_int64)), (max(c, 1),))[:c].copy()
            val_type = C.c_float if dt == 0 else C.c_uint16
            val = np.ctypeslib.as_array(C.cast(val_p[t], C.POINTER(val_type)), (max(c, 1),))[:c].copy()
            lib.tfnmt_free_host(idx_p[t])
            lib.tfnmt_free_host(val_p[t])
            if not same(idx, a[f"idx{t}"]):
                problems.append(f"t{t} indices ({c} vs {a[f'idx{t}'].size})")
            elif not same(val, a[f"val{t}"]):
                problems.append(f"t{t} values")
            if not same(new_res[t], a[f"res{t}"]):
                problems.append(f"t{t} residual [{describe(new_res[t], a[f'res{t}'])}]")
            if not in_place and not same(old_res[t], rs[t]):
                problems.append(f"t{t} residual input overwritten out of place")
        if "threshold" in q and f32_bits(thr.value) != q["threshold"]:
            problems.append(f"threshold {thr.value!r} vs {np.uint32(q['threshold']).view(np.float32)!r}")
        return "; ".join(problems)
    if k == "one_bit":
        dt, cols, size = q["dtype"], q["columns"], q["size"]
        kept = a["idx"].size
        res = a["res"].copy()
        qv = np.empty(kept, RAW[dt])
        pos, neg = np.empty(cols, RAW[dt]), np.empty(cols, RAW[dt])
        bad = I32()
        rc = lib.tfnmt_one_bit(dt, p(a["idx"]), p(a["val"]), kept, cols, p(res), size, p(qv), p(pos), p(neg), C.byref(bad))
        if rc:
            return f"rc={rc}"
        if q["bad"]:
            return "" if bad.value else "bad index not flagged"
        problems = [f"{name} [{describe(got, a[name])}]" for name, got in
                    (("q", qv), ("new_res", res), ("pos", pos), ("neg", neg)) if not same(got, a[name])]
        return ("bad flag set; " if bad.value else "") + ", ".join(problems)
    return f"unknown case kind {k}"


def torch_topk_seconds(n: int, repeats: int):
    """A top-k compressor (as scripts/bench_ops.topk_compressor) in PyTorch on the GPU, or None."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    g = torch.randn(n, device="cuda")
    r = torch.randn(n, device="cuda") * 0.1
    k = n - int(np.floor(0.99 * n))

    def step():
        total = g + r
        _, idx = torch.topk(total.abs(), k, sorted=False)
        values = total[idx]
        total[idx] = 0
        return idx, values, total

    times = []
    for i in range(repeats + 1):
        torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        if i:
            times.append(time.perf_counter() - start)
    return float(np.median(times))


def gpu_name() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", default=os.path.join(ROOT, "build/standalone/libtfnmt_harness.so"))
    parser.add_argument("--golden", default=os.path.join(ROOT, "build/gpu_golden"))
    parser.add_argument("--bench-sizes", type=int, nargs="*", default=[1_000_000, 100_000_000])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--only", help="run only cases whose name contains this (e.g. under compute-sanitizer)")
    parser.add_argument("--out", help="JSON report (only written after a run on a GPU)")
    args = parser.parse_args()
    lib = load(args.lib)
    with open(os.path.join(args.golden, "cases.json")) as handle:
        cases = json.load(handle)["cases"]
    if args.only:
        cases = [c for c in cases if args.only in c["params"].get("name", c["kind"])]
    arr = np.load(os.path.join(args.golden, "golden.npz"))
    failed = []
    for case in cases:
        problem = check(lib, case, arr)
        if problem:
            failed.append((case["params"].get("name", case["kind"]), problem))
            print(f"FAIL {case['kind']} {case['params'].get('name', '')}: {problem}", flush=True)
    passed = len(cases) - len(failed)
    bench = {}
    for n in args.bench_sizes:
        out = (C.c_double * 10)()
        rc = lib.tfnmt_bench(n, args.repeats, out)
        if rc:
            print(f"bench n={n}: CUDA error {rc}")
            continue
        row = {f"{key}_s": out[i] for i, key in enumerate(BENCH_KEYS)}
        for key in BENCH_KEYS:
            row[f"{key}_gbps"] = BENCH_BYTES[key] * n / row[f"{key}_s"] / 1e9
            if key != "copy":
                row[f"{key}_copy_fraction"] = row["copy_s"] / row[f"{key}_s"]
        row["graddrop_kept_fraction"] = out[9]
        topk = torch_topk_seconds(n, max(2, args.repeats // 3))
        if topk is not None:
            row["torch_topk_s"] = topk
            row["graddrop_vs_torch_topk"] = topk / row["graddrop_s"]
        bench[str(n)] = row
        print(f"bench n={n}: " + ", ".join(f"{k}={v:.4g}" for k, v in row.items()), flush=True)
    if args.out:
        report = {"gpu": gpu_name(), "platform": platform.platform(), "cases": len(cases),
                  "passed": passed, "failed": [f"{n}: {p_}" for n, p_ in failed], "bench": bench,
                  "note": "stand-alone harness (no TensorFlow): CUDA launchers vs golden outputs of "
                          "the TF CPU kernels; copy = cudaMemcpyAsync device-to-device; torch.topk "
                          "stands in for tf.math.top_k"}
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as handle:
            json.dump(report, handle, indent=2)
    print(f"{passed} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
