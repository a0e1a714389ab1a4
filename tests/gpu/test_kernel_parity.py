"""GPU kernels against the CPU kernels (bit for bit) and the NumPy references.

Every comparison here is exact: the GPU kernels reproduce the CPU kernels' arithmetic, including
the scale fit's double sums (same order) and GradDrop's sampled threshold (same samples, exact
order statistic). Sizes straddle the kernels' block sizes (4096 for GradDrop, 65536 for the fit)
and the vectorised paths (unaligned slices, odd tails).
"""
import math

import numpy as np
import pytest

from tests.gpu.conftest import require_gpu

require_gpu()

import tf_nmt  # noqa: E402,F401
from tf_nmt import ops  # noqa: E402
from tf_nmt.compat import tf  # noqa: E402
from tf_nmt.ops import loader  # noqa: E402
from tests.gpu.helpers import (  # noqa: E402
    assert_bits_equal, on_gpu, run_on, special_values, tensor)
from tests.ops import reference as ref  # noqa: E402

pytestmark = pytest.mark.gpu

SIZES = [1, 7, 4095, 4097, 65537, 200_003]
KINDS = {"log": ops.LOG, "fixed": ops.FIXED}


def test_library_has_gpu_kernels():
    assert loader.gpu_kernels_built(), f"library built without CUDA: {loader.build_info()}"
    out = run_on("GPU", ops.LOG.encode, tf.ones([8]), 1.0, 4)
    assert on_gpu(out), out.device


# ---- quantisers -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("n", SIZES)
def test_fit_encode_decode_match_cpu(kind, n, dtype):
    q = KINDS[kind]
    x = tensor(special_values(n, seed=n) * 3, dtype)
    for bits in (1, 2, 4, 8):
        for mode in ("unscaled", "max", "optimised"):
            s_cpu = run_on("CPU", q.fit_scale, x, bits, mode)
            s_gpu = run_on("GPU", q.fit_scale, x, bits, mode)
            assert_bits_equal(s_gpu, s_cpu, f"fit {kind} bits={bits} mode={mode}")
        scale = float(s_cpu)
        c_cpu = run_on("CPU", q.encode, x, scale, bits)
        c_gpu = run_on("GPU", q.encode, x, scale, bits)
        assert on_gpu(c_gpu)
        assert_bits_equal(c_gpu, c_cpu, f"encode {kind} bits={bits}")
        for out in ("float32", "float16", "bfloat16"):
            y_cpu = run_on("CPU", q.decode, c_cpu, scale, bits, tf.as_dtype(out))
            y_gpu = run_on("GPU", q.decode, c_cpu, scale, bits, tf.as_dtype(out))
            assert_bits_equal(y_gpu, y_cpu, f"decode {kind} bits={bits} -> {out}")
        codes_cpu, sc_cpu = run_on("CPU", q.quantize, x, bits)
        codes_gpu, sc_gpu = run_on("GPU", q.quantize, x, bits)
        assert_bits_equal(sc_gpu, sc_cpu, "quantize scale")
        assert_bits_equal(codes_gpu, codes_cpu, "quantize codes")
        qd_cpu = run_on("CPU", q.quantize_dequantize, x, bits)
        qd_gpu = run_on("GPU", q.quantize_dequantize, x, bits)
        assert_bits_equal(qd_gpu, qd_cpu, "quantize_dequantize")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_quantizer_matches_numpy_reference(kind):
    x = special_values(100_003, seed=5)
    for bits in (2, 4, 8):
        scale = float(run_on("GPU", KINDS[kind].fit_scale, tf.constant(x), bits))
        assert scale == np.float32(ref.fit_scale(kind, x, bits))
        codes = run_on("GPU", KINDS[kind].encode, tf.constant(x), scale, bits).numpy()
        np.testing.assert_array_equal(codes, ref.encode(kind, x, scale, bits))
        y = run_on("GPU", KINDS[kind].decode, tf.constant(codes), scale, bits).numpy()
        np.testing.assert_array_equal(y, ref.decode(kind, codes, scale, bits))


def test_offset_slices_and_odd_tails():
    """Slices taken on the device at odd offsets (aligned or not, as TF slices them) and tails."""
    base = tf.constant(special_values(70_001, seed=9))
    for start in (1, 2, 3):
        for q in KINDS.values():
            c_cpu = run_on("CPU", q.encode, base[start:], 1.5, 4)
            with tf.device("/GPU:0"):
                c_gpu = q.encode(tf.identity(base)[start:], 1.5, 4)
                y_gpu = q.decode(tf.identity(c_gpu)[start:], 1.5, 4)
            assert_bits_equal(c_gpu, c_cpu, f"encode start={start}")
            assert_bits_equal(y_gpu, run_on("CPU", q.decode, c_cpu[start:], 1.5, 4), "decode")


def test_requantising_a_quantised_tensor_is_lossless_on_gpu():
    x = tf.constant(special_values(300_000, seed=3))
    y = run_on("GPU", ops.LOG.quantize_dequantize, x, 4)
    codes, scale = run_on("GPU", ops.LOG.quantize, y, 4)
    codes2, scale2 = run_on("GPU", ops.LOG.quantize, run_on("GPU", ops.LOG.decode, codes, float(scale), 4), 4)
    assert float(scale2) == float(scale)
    assert_bits_equal(codes2, codes)


def test_quantize_dequantize_straight_through_gradient_on_gpu():
    with tf.device("/GPU:0"):
        x = tf.Variable(tf.random.normal([1000]))
        with tf.GradientTape() as tape:
            y = ops.log_quantize_dequantize(x, 4)
            loss = tf.reduce_sum(y * 3.0)
        grad = tape.gradient(loss, x)
    np.testing.assert_array_equal(grad.numpy(), np.full(1000, 3.0, np.float32))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 8, 9, 100_001])
def test_nibbles_match_cpu(n):
    codes = tf.constant(np.random.default_rng(n).integers(0, 16, n, dtype=np.uint8))
    for sl in (slice(None), slice(1, None)):
        c = codes[sl]
        p_cpu = run_on("CPU", ops.pack_nibbles, c)
        p_gpu = run_on("GPU", ops.pack_nibbles, c)
        assert_bits_equal(p_gpu, p_cpu, f"pack n={n}")
        size = int(c.shape[0])
        u_gpu = run_on("GPU", ops.unpack_nibbles, p_gpu, size)
        assert_bits_equal(u_gpu, c, f"unpack n={n}")


# ---- GradDrop / OneBit -------------------------------------------------------------------------

def _pair(n, seed, dtype="float32", scale=1.0):
    rng = np.random.default_rng(seed)
    g = special_values(n, seed) * scale
    r = (rng.standard_normal(n) * 0.1 * scale).astype(np.float32)
    return tensor(g, dtype), tensor(r, dtype)


def _assert_drop_equal(got, want, what):
    names = ("indices", "values", "new_residual", "threshold")
    for name, a, b in zip(names, got, want):
        assert_bits_equal(a, b, f"{what}: {name}")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("n", [1, 4095, 4096, 4097, 65536, 70_001, 1_000_003])
@pytest.mark.parametrize("ratio", [0.0, 0.5, 0.99])
def test_grad_drop_matches_cpu(n, dtype, ratio):
    g, r = _pair(n, seed=n, dtype=dtype)
    kw = dict(sample_fraction=0.001, seed=11, return_threshold=True)
    want = run_on("CPU", ops.grad_drop, g, r, ratio, **kw)
    got = run_on("GPU", ops.grad_drop, g, r, ratio, **kw)
    assert on_gpu(got[0]) and on_gpu(got[2])
    _assert_drop_equal(got, want, f"n={n} {dtype} R={ratio}")


def test_grad_drop_exact_path_matches_numpy_reference():
    for n in (10, 5000, 300_000):
        g, r = _pair(n, seed=n)
        idx, val, res, thr = run_on("GPU", ops.grad_drop, g, r, 0.9, exact_below=10**9,
                                    return_threshold=True)
        want_thr = ref.threshold_exact(ref.ftz_sum(g.numpy(), r.numpy()), 0.9)
        assert float(thr) == want_thr
        w_idx, w_val, w_res = ref.grad_drop(g.numpy(), r.numpy(), want_thr)
        np.testing.assert_array_equal(idx.numpy(), w_idx)
        np.testing.assert_array_equal(val.numpy(), w_val)
        np.testing.assert_array_equal(res.numpy(), w_res)


def test_grad_drop_subnormal_sums_are_flushed_like_the_cpu():
    tiny = np.finfo(np.float32).tiny
    g = np.array([tiny, -tiny, tiny / 2, 1.0, -tiny * 1.5, 3.0], np.float32)
    r = np.array([-tiny / 2, tiny / 4, tiny / 4, 0.0, tiny, -tiny / 3], np.float32)
    want = run_on("CPU", ops.grad_drop, tf.constant(g), tf.constant(r), 0.0, return_threshold=True)
    got = run_on("GPU", ops.grad_drop, tf.constant(g), tf.constant(r), 0.0, return_threshold=True)
    _assert_drop_equal(got, want, "subnormals")


def test_grad_drop_all_nan_and_empty():
    nan = tf.fill([5000], float("nan"))
    for ratio in (0.0, 0.9):
        _assert_drop_equal(run_on("GPU", ops.grad_drop, nan, tf.zeros([5000]), ratio, return_threshold=True),
                           run_on("CPU", ops.grad_drop, nan, tf.zeros([5000]), ratio, return_threshold=True),
                           f"all NaN R={ratio}")
        empty = tf.zeros([0, 3])
        _assert_drop_equal(run_on("GPU", ops.grad_drop, empty, empty, ratio, return_threshold=True),
                           run_on("CPU", ops.grad_drop, empty, empty, ratio, return_threshold=True),
                           f"empty R={ratio}")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_grad_drop_global_matches_cpu(dtype):
    shapes = [(512,), (0,), (300, 700), (1,), (4096,), (33, 4097), (7, 0)]
    pairs = [_pair(int(np.prod(s)), seed=i, dtype=dtype) for i, s in enumerate(shapes)]
    grads = [tf.reshape(g, s) for (g, _), s in zip(pairs, shapes)]
    res = [tf.reshape(r, s) for (_, r), s in zip(pairs, shapes)]
    for exact_below in (65536, 10**9):
        want = run_on("CPU", ops.grad_drop_global, grads, res, 0.99, seed=3, exact_below=exact_below)
        got = run_on("GPU", ops.grad_drop_global, grads, res, 0.99, seed=3, exact_below=exact_below)
        for t, (a, b) in enumerate(zip(got, want)):
            _assert_drop_equal(a, b, f"tensor {t} exact_below={exact_below}")


def test_grad_drop_conserves_mass_on_gpu():
    g, r = _pair(1_000_003, seed=1)
    idx, val, res = run_on("GPU", ops.grad_drop, g, r, 0.99)
    dense = np.zeros(g.shape[0], np.float32)
    dense[idx.numpy()] = val.numpy()
    np.testing.assert_array_equal(dense + res.numpy(), ref.ftz_sum(g.numpy(), r.numpy()))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(5000,), (300, 257), (64, 4096)])
def test_one_bit_matches_cpu(shape, dtype):
    n = int(np.prod(shape))
    g, r = _pair(n, seed=n, dtype=dtype)
    g, r = tf.reshape(g, shape), tf.reshape(r, shape)
    idx, val, res = run_on("CPU", ops.grad_drop, g, r, 0.9)
    want = run_on("CPU", ops.one_bit_quantize, idx, val, res)
    got = run_on("GPU", ops.one_bit_quantize, idx, val, res)
    assert on_gpu(got[0])
    for name, a, b in zip(("quantized", "residual", "pos", "neg"), got, want):
        assert_bits_equal(a, b, f"one-bit {shape} {dtype}: {name}")


def test_one_bit_duplicate_indices_follow_the_cpu_order():
    residual = tf.zeros([4, 3])
    idx = tf.constant([5, 2, 5, 11, 5, 0], tf.int64)
    val = tf.constant([1.0, -2.0, 3.0, -0.5, 1e-3, 0.0])
    want = run_on("CPU", ops.one_bit_quantize, idx, val, residual)
    got = run_on("GPU", ops.one_bit_quantize, idx, val, residual)
    for a, b in zip(got, want):
        assert_bits_equal(a, b, "duplicates")


def test_graddrop_one_bit_inside_tf_function_keeps_tensors_on_gpu():
    with tf.device("/GPU:0"):
        grad = tf.random.normal([256, 1024])
        residual = tf.Variable(tf.zeros([256, 1024]))

        @tf.function
        def step(g):
            idx, val, new_res = ops.grad_drop_one_bit(g, residual, 0.99)
            residual.assign(new_res)
            return idx, val

        idx, val = step(grad)
        idx2, _ = step(grad)
    assert on_gpu(val) and on_gpu(residual.value())
    assert 0 < idx.shape[0] < grad.shape[0] * grad.shape[1] // 10
    assert not math.isnan(float(tf.reduce_sum(residual)))
    assert idx2.shape[0] > 0
