"""Golden inputs and outputs of the real CPU kernels, for checking the CUDA kernels where no
TensorFlow is installed (the device tool's GPU machines have nvcc and NumPy but no TensorFlow).

Run here, on the CPU, with the project's venv; writes ``build/gpu_golden/golden.npz`` and
``build/gpu_golden/cases.json`` (about 30 MB). ``run_standalone.py`` replays every case through the
stand-alone harness (``harness_capi.cu.cc``) on the GPU and compares bit for bit. 16-bit values
are stored as their raw uint16 bits (NumPy has no bfloat16).

    .venv/bin/python tests/gpu/standalone/make_golden.py [--out build/gpu_golden]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

import tf_nmt  # noqa: E402,F401
from tf_nmt import ops  # noqa: E402
from tf_nmt.compat import tf  # noqa: E402
from tf_nmt.ops.loader import load_ops  # noqa: E402
from tests.gpu.helpers import special_values  # noqa: E402

DTYPES = {"float32": (0, tf.float32), "float16": (1, tf.float16), "bfloat16": (2, tf.bfloat16)}
CODECS = {"log": (0, ops.LOG), "fixed": (1, ops.FIXED)}
MODES = {"unscaled": 0, "max": 1, "optimised": 2}


def raw(t) -> np.ndarray:
    """Tensor -> NumPy array of its raw bits for 16-bit types, float32/int/uint8 as they are."""
    if t.dtype in (tf.float16, tf.bfloat16):
        return tf.bitcast(t, tf.uint16).numpy()
    return t.numpy()


class Golden:
    def __init__(self) -> None:
        self.arrays: dict = {}
        self.by_digest: dict = {}
        self.cases: list = []

    def add(self, kind: str, params: dict, arrays: dict) -> None:
        names = {}
        for key, value in arrays.items():
            value = np.ascontiguousarray(value)
            digest = hashlib.sha1(value.tobytes() + str((value.dtype.str, value.shape)).encode()).hexdigest()
            name = self.by_digest.setdefault(digest, f"a{len(self.by_digest)}")  # shared inputs stored once
            self.arrays[name] = value
            names[key] = name
        self.cases.append({"kind": kind, "params": params, "arrays": names})


def quant_cases(gold: Golden) -> None:
    for codec, (codec_id, q) in CODECS.items():
        for dtype, (dtype_id, tf_dtype) in DTYPES.items():
            sizes = [1, 7, 4097, 70001] + ([300001] if dtype == "float32" else [])
            for n in sizes:
                with np.errstate(over="ignore"):  # 3e38 * 3 -> inf on purpose
                    x = tf.cast(tf.constant(special_values(n, seed=n) * 3), tf_dtype)
                big = n > 100_000
                for bits in ((4,) if big else (2, 4, 8)):
                    base = {"codec": codec_id, "dtype": dtype_id, "n": n, "bits": bits,
                            "name": f"{codec}/{dtype}/n={n}/bits={bits}"}
                    scales = {m: float(q.fit_scale(x, bits, m)) for m in MODES}
                    for mode, s in scales.items():
                        gold.add("fit", dict(base, mode=MODES[mode], iterations=10,
                                             scale=np.float32(s).view(np.uint32).item()), {"x": raw(x)})
                    codes, scale = q.quantize(x, bits)
                    gold.add("quantize", dict(base, mode=2, iterations=10,
                                              scale=np.float32(scale).view(np.uint32).item()),
                             {"x": raw(x), "codes": codes.numpy()})
                    if big:
                        continue
                    s = scales["optimised"]
                    gold.add("encode", dict(base, scale=s), {"x": raw(x), "codes": q.encode(x, s, bits).numpy()})
                    if bits in (4, 8):
                        y = q.quantize_dequantize(x, bits)
                        gold.add("qdq", dict(base, mode=2, iterations=10,
                                             scale=np.float32(scale).view(np.uint32).item()),
                                 {"x": raw(x), "y": raw(y)})
                    if bits == 4 and dtype == "float32":
                        c = codes
                        for out, (out_id, out_dtype) in DTYPES.items():
                            gold.add("decode", dict(base, dtype=out_id, scale=s, bad=0,
                                                    name=f"{codec}/decode->{out}/n={n}"),
                                     {"codes": c.numpy(), "y": raw(q.decode(c, s, bits, out_dtype))})
        bad = np.zeros(5000, np.uint8)
        bad[4321] = 16
        gold.add("decode", {"codec": codec_id, "dtype": 0, "n": bad.size, "bits": 4, "scale": 1.0,
                            "bad": 1, "name": f"{codec}/decode code 16 at 4 bits"}, {"codes": bad})


def nibble_cases(gold: Golden) -> None:
    rng = np.random.default_rng(1)
    for n in (0, 1, 2, 3, 5, 8, 9, 100_001):
        codes = rng.integers(0, 16, n, dtype=np.uint8)
        gold.add("nibbles", {"n": n, "bad": 0, "name": f"nibbles/n={n}"},
                 {"codes": codes, "packed": ops.pack_nibbles(codes).numpy()})
    for at in (1, 4097):
        codes = np.zeros(5000, np.uint8)
        codes[at] = 17
        gold.add("nibbles", {"n": codes.size, "bad": 1, "name": f"nibbles/code 17 at {at}"}, {"codes": codes})


def _pair(n, seed, tf_dtype):
    rng = np.random.default_rng(seed)
    g = tf.cast(tf.constant(special_values(n, seed)), tf_dtype)
    r = tf.cast(tf.constant((rng.standard_normal(n) * 0.1).astype(np.float32)), tf_dtype)
    return g, r


def grad_drop_cases(gold: Golden) -> None:
    def add(name, dtype_id, grads, res, ratio, exact_below=65536, seed=11, fraction=0.001,
            in_place=True):
        out = ops.grad_drop_global(grads, res, ratio, fraction, seed, exact_below)
        if len(grads) == 1:
            thr = ops.grad_drop(grads[0], res[0], ratio, fraction, seed, exact_below, return_threshold=True)[3]
        else:  # GradDropGlobal's one threshold, shared by all tensors (the wrapper drops it)
            thr = load_ops().grad_drop_global(
                grads, res, tf.constant(ratio, tf.float32), tf.constant(fraction, tf.float32),
                tf.constant(seed, tf.int64), exact_below=exact_below)[3]
        arrays = {}
        for t, (g, r, (idx, val, new_res)) in enumerate(zip(grads, res, out)):
            arrays.update({f"g{t}": raw(tf.reshape(g, [-1])), f"r{t}": raw(tf.reshape(r, [-1])),
                           f"idx{t}": idx.numpy(), f"val{t}": raw(val), f"res{t}": raw(tf.reshape(new_res, [-1]))})
        params = {"dtype": dtype_id, "tensors": len(grads), "ratio": ratio, "fraction": fraction,
                  "seed": seed, "exact_below": exact_below, "min_sample": 16384, "name": name}
        params["threshold"] = np.float32(thr).view(np.uint32).item()
        if not in_place:  # the harness writes the new residual to a buffer of its own
            params["in_place"] = False
        gold.add("grad_drop", params, arrays)

    for dtype, (dtype_id, tf_dtype) in DTYPES.items():
        for n in (1, 4095, 4097, 70001):
            for ratio in (0.0, 0.5, 0.99):
                g, r = _pair(n, n, tf_dtype)
                add(f"grad_drop/{dtype}/n={n}/R={ratio}", dtype_id, [g], [r], ratio)
        g, r = _pair(70001, 3, tf_dtype)
        add(f"grad_drop/{dtype}/exact n=70001", dtype_id, [g], [r], 0.9, exact_below=10**9)
        shapes = [512, 0, 210_000, 1, 4096, 33 * 4097]
        pairs = [_pair(s, i, tf_dtype) for i, s in enumerate(shapes)]
        for exact_below in (65536, 10**9):
            add(f"grad_drop_global/{dtype}/exact_below={exact_below}", dtype_id,
                [p[0] for p in pairs], [p[1] for p in pairs], 0.99, exact_below=exact_below, seed=3)
        # out-of-place residuals (TF allocates the new residual when it cannot forward the input)
        g, r = _pair(70001, 70001, tf_dtype)
        add(f"grad_drop/{dtype}/n=70001/R=0.99/out of place", dtype_id, [g], [r], 0.99, in_place=False)
        add(f"grad_drop_global/{dtype}/exact_below=65536/out of place", dtype_id,
            [p[0] for p in pairs], [p[1] for p in pairs], 0.99, exact_below=65536, seed=3, in_place=False)
    g, r = _pair(1_000_003, 1, tf.float32)
    add("grad_drop/float32/n=1000003 sampled", 0, [g], [r], 0.99)
    tiny = np.finfo(np.float32).tiny
    g = tf.constant(np.array([tiny, -tiny, tiny / 2, 1.0, -tiny * 1.5, 3.0], np.float32))
    r = tf.constant(np.array([-tiny / 2, tiny / 4, tiny / 4, 0.0, tiny, -tiny / 3], np.float32))
    add("grad_drop/subnormal sums", 0, [g], [r], 0.0)
    nan = tf.fill([5000], float("nan"))
    add("grad_drop/all NaN", 0, [nan], [tf.zeros([5000])], 0.9)


def one_bit_cases(gold: Golden) -> None:
    for dtype, (dtype_id, tf_dtype) in DTYPES.items():
        for shape in ((5000,), (300, 257), (64, 4096)):
            n = int(np.prod(shape))
            g, r = _pair(n, n, tf_dtype)
            idx, val, res = ops.grad_drop(tf.reshape(g, shape), tf.reshape(r, shape), 0.9)
            q, new_res, pos, neg = ops.one_bit_quantize(idx, val, res)
            gold.add("one_bit", {"dtype": dtype_id, "columns": ops.num_columns(shape), "size": n, "bad": 0,
                                 "name": f"one_bit/{dtype}/{shape}"},
                     {"idx": idx.numpy(), "val": raw(val), "res": raw(tf.reshape(res, [-1])), "q": raw(q),
                      "new_res": raw(tf.reshape(new_res, [-1])), "pos": raw(pos), "neg": raw(neg)})
    idx = np.array([5, 2, 5, 11, 5, 0], np.int64)
    val = tf.constant([1.0, -2.0, 3.0, -0.5, 1e-3, 0.0])
    q, new_res, pos, neg = ops.one_bit_quantize(idx, val, tf.zeros([4, 3]))
    gold.add("one_bit", {"dtype": 0, "columns": 3, "size": 12, "bad": 0, "name": "one_bit/duplicates"},
             {"idx": idx, "val": raw(val), "res": np.zeros(12, np.float32), "q": raw(q),
              "new_res": raw(tf.reshape(new_res, [-1])), "pos": raw(pos), "neg": raw(neg)})
    gold.add("one_bit", {"dtype": 0, "columns": 3, "size": 9, "bad": 1, "name": "one_bit/index 9 of 9"},
             {"idx": np.array([0, 9], np.int64), "val": np.ones(2, np.float32), "res": np.zeros(9, np.float32)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="build/gpu_golden")
    args = parser.parse_args()
    with tf.device("/CPU:0"):
        gold = Golden()
        quant_cases(gold)
        nibble_cases(gold)
        grad_drop_cases(gold)
        one_bit_cases(gold)
    os.makedirs(args.out, exist_ok=True)
    np.savez_compressed(os.path.join(args.out, "golden.npz"), **gold.arrays)
    with open(os.path.join(args.out, "cases.json"), "w") as handle:
        json.dump({"tensorflow": tf.__version__, "cases": gold.cases}, handle, indent=1)
    size = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    print(f"{len(gold.cases)} cases, {size / 1e6:.1f} MB in {args.out}")


if __name__ == "__main__":
    main()
