"""Log-space dot-product ops: exact integer agreement with the NumPy reference on both dispatch
paths (AVX-512 and the scalar fallback), odd sizes, edge codes, scaling, and misuse."""
from __future__ import annotations

import numpy as np
import pytest

import tf_nmt  # noqa: F401
from tf_nmt import ops
from tf_nmt.compat import tf
from tf_nmt.ops import lowprec
from tf_nmt.ops.loader import load_ops
from tests.ops import lowprec_reference as lref

VARIANTS = lowprec.VARIANTS
SIMD = lowprec.simd_available()
IMPLS = ["scalar", "auto"] + (["simd"] if SIMD else [])
# (M, K, N): K not a multiple of 64, M or N = 1, several 16 x 128 output tiles, 2 x 4 blocks
# with remainders, K below and above one 64-element slice.
SHAPES = [(1, 1, 1), (1, 128, 1), (1, 65, 7), (2, 64, 4), (5, 63, 9), (3, 200, 1),
          (17, 129, 130), (33, 300, 261), (4, 1000, 5)]


def _codes(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.integers(0, 16, size=shape, dtype=np.uint8)


def test_lut8_constants_follow_their_formulas():
    np.testing.assert_array_equal(lref.LUT8_TABLE, lref.lut8_table_from_formula())
    np.testing.assert_array_equal(lref.LUT8_MID, lref.lut8_mids_from_formula())
    assert tuple(lref.LUT8_TABLE) == lowprec.LUT8_TABLE
    assert lowprec.LUT8_BASE ** 14 == pytest.approx(256.0)


def _encode_inputs(rng: np.random.Generator) -> np.ndarray:
    x = (rng.standard_normal(4000) * np.exp(rng.standard_normal(4000) * 2)).astype(np.float32)
    c2 = 2.0 ** -np.arange(9)
    cl = lowprec.LUT8_BASE ** -np.arange(9)
    edges = np.concatenate([
        [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-40, -1e-40, 3e38, -3e38],
        c2, -c2, 0.75 * c2, -0.75 * c2,  # base-2 centres and ties
        cl, -cl, lref.LUT8_MID, -lref.LUT8_MID,  # lut8 centres and ties
        np.nextafter(lref.LUT8_MID, np.float32(1)), np.nextafter(lref.LUT8_MID, np.float32(0)),
    ]).astype(np.float32)
    return np.concatenate([x, edges])


@pytest.mark.parametrize("variant", VARIANTS)
def test_encode_matches_reference(variant):
    rng = np.random.default_rng(5)
    x = _encode_inputs(rng)
    for scale in (1.0, 0.37, float(np.nanmax(np.abs(x[np.isfinite(x)]))), 0.0):
        codes = lowprec.encode(x, scale, variant).numpy()
        np.testing.assert_array_equal(codes, lref.encode(x, scale, variant))
        if variant == "shift16":  # the same codes as the weight quantiser's 4-bit log codes
            np.testing.assert_array_equal(codes, ops.LOG.encode(x, scale, 4).numpy())


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16])
@pytest.mark.parametrize("variant", VARIANTS)
def test_encode_low_precision_inputs(dtype, variant):
    x = tf.cast(_encode_inputs(np.random.default_rng(6))[:4000], dtype)
    codes = lowprec.encode(x, 0.5, variant).numpy()
    np.testing.assert_array_equal(codes, lref.encode(tf.cast(x, tf.float32).numpy(), 0.5, variant))


@pytest.mark.parametrize("variant", VARIANTS)
def test_encode_decode_round_trip_is_nearest_centre(variant):
    x = np.random.default_rng(7).uniform(-2, 2, 5000).astype(np.float32)
    y = lowprec.decode(lowprec.encode(x, 1.5, variant), 1.5, variant).numpy()
    centres = 1.5 * lowprec.relative_centres(variant).astype(np.float64)
    best = np.min(np.abs(np.abs(x)[:, None] - centres[None, :]), axis=1)
    np.testing.assert_allclose(np.abs(np.abs(x) - np.abs(y)), best, rtol=1e-6, atol=1e-7)
    assert np.all(np.sign(y) == np.where(x < 0, -1, 1))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_accumulators_exact(shape, variant, impl):
    m, k, n = shape
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a, b = _codes(rng, (m, k)), _codes(rng, (n, k))
    acc = lowprec.matmul_accumulators(a, b, variant, impl=impl).numpy()
    assert acc.dtype == np.int32 and acc.shape == (m, n)
    np.testing.assert_array_equal(acc, lref.accumulators(a, b, variant))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_edge_codes(variant, impl):
    """All-largest products of one sign (the accumulator's extremes), all-smallest, mixed."""
    k = 777
    a = np.stack([np.full(k, c, np.uint8) for c in (0, 8, 7, 15)])
    b = np.stack([np.full(k, c, np.uint8) for c in (0, 8, 7, 15)] + [np.arange(k, dtype=np.uint8) % 16])
    acc = lowprec.matmul_accumulators(a, b, variant, impl=impl).numpy()
    np.testing.assert_array_equal(acc, lref.accumulators(a, b, variant))
    top = lref.powers(variant)[0] * k
    assert acc[0, 0] == top and acc[1, 1] == top and acc[0, 1] == -top


@pytest.mark.parametrize("impl", IMPLS)
def test_largest_k_fills_int32_exactly(impl):
    k = 131071  # K * 2^14 < 2^31: the shift16 limit
    ones = np.zeros((1, k), np.uint8)  # code 0 is +1 * S
    assert int(lowprec.matmul_accumulators(ones, ones, "shift16", impl=impl)[0, 0]) == k * 2 ** 14
    neg = np.full((1, k), 8, np.uint8)
    assert int(lowprec.matmul_accumulators(ones, neg, "shift16", impl=impl)[0, 0]) == -k * 2 ** 14


@pytest.mark.parametrize("variant", VARIANTS)
def test_simd_and_scalar_agree_on_random_sizes(variant):
    rng = np.random.default_rng(11)
    for _ in range(25):
        m, k, n = (int(v) for v in rng.integers(1, [40, 400, 300]))
        a, b = _codes(rng, (m, k)), _codes(rng, (n, k))
        scalar = lowprec.matmul_accumulators(a, b, variant, impl="scalar").numpy()
        np.testing.assert_array_equal(lowprec.matmul_accumulators(a, b, variant).numpy(), scalar)
        np.testing.assert_array_equal(scalar, lref.accumulators(a, b, variant))


def test_env_var_forces_scalar_path(monkeypatch):
    """$TF_NMT_LOWPREC_SCALAR (non-empty, not "0") makes impl='auto' take the scalar loop: the
    kernels' own resolution (LowprecResolveImpl, read afresh per call, as the matmul kernels do)
    says which path runs; the integers are the same either way. No timing: runs on any CPU."""
    rng = np.random.default_rng(3)
    a, b = _codes(rng, (9, 150)), _codes(rng, (13, 150))
    want = lref.accumulators(a, b, "lut8")
    for value, forced in ((None, False), ("1", True), ("0", False), ("", False), ("yes", True)):
        if value is None:
            monkeypatch.delenv(lowprec.FORCE_SCALAR_ENV, raising=False)
        else:
            monkeypatch.setenv(lowprec.FORCE_SCALAR_ENV, value)
        assert lowprec.scalar_forced_by_env() is forced, value
        assert lowprec.resolved_impl("auto") == ("simd" if SIMD and not forced else "scalar"), value
        assert lowprec.resolved_impl("scalar") == "scalar"
        if SIMD:  # an explicit impl='simd' is not overridden by the variable
            assert lowprec.resolved_impl("simd") == "simd"
        else:
            with pytest.raises(tf.errors.InvalidArgumentError, match="AVX-512"):
                lowprec.resolved_impl("simd")
        np.testing.assert_array_equal(lowprec.matmul_accumulators(a, b, "lut8").numpy(), want)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_scaled_matmul_exact(variant, impl):
    rng = np.random.default_rng(13)
    a, b = _codes(rng, (7, 333)), _codes(rng, (21, 333))
    for sa, sb in ((1.0, 1.0), (0.37, 2.5), (3.0, 1e-3), (0.0, 4.0)):
        y = lowprec.matmul(a, b, sa, sb, variant, impl=impl).numpy()
        np.testing.assert_array_equal(y, lref.matmul(a, b, sa, sb, variant))


def test_b_layout_kn_is_transposed_nk():
    rng = np.random.default_rng(17)
    a, b = _codes(rng, (6, 90)), _codes(rng, (11, 90))
    for variant in VARIANTS:
        np.testing.assert_array_equal(
            lowprec.matmul(a, b.T, 0.5, 0.25, variant, b_layout="kn").numpy(),
            lowprec.matmul(a, b, 0.5, 0.25, variant).numpy())


@pytest.mark.parametrize("variant", VARIANTS)
def test_dense_is_the_product_of_decoded_values(variant):
    """shift16 is exact in float64 up to the final float32 rounding; lut8 differs from the true
    base-2^(4/7) products only by the table's rounding, sum_t |T[e_t] / 255 - b^-e_t|."""
    rng = np.random.default_rng(19)
    x = rng.standard_normal((2, 3, 96)).astype(np.float32)
    w = rng.standard_normal((96, 40)).astype(np.float32)
    x_scale, w_scale = 2.0, float(np.abs(w).max())
    w_codes = lowprec.encode(w, w_scale, variant)
    y = lowprec.dense(x, w_codes, x_scale, w_scale, variant).numpy()
    assert y.shape == (2, 3, 40)
    x_codes = lref.encode(x.reshape(-1, 96), x_scale, variant)
    wn = w_codes.numpy().T
    np.testing.assert_array_equal(y.reshape(-1, 40), lref.matmul(x_codes, wn, x_scale, w_scale, variant))
    exact = lref.decode(x_codes, x_scale, variant) @ lref.decode(wn, w_scale, variant).T
    if variant == "shift16":
        np.testing.assert_allclose(y.reshape(-1, 40), exact, rtol=1e-6, atol=1e-6)
    else:
        e = (x_codes.astype(np.int64)[:, None, :] & 7) + (wn.astype(np.int64)[None, :, :] & 7)
        err = np.abs(lref.LUT8_TABLE[e] / 255.0 - lref.LUT8_BASE ** -e.astype(np.float64))
        bound = x_scale * w_scale * err.sum(axis=-1) + 1e-5 * (1 + np.abs(exact))
        assert np.all(np.abs(y.reshape(-1, 40) - exact) <= bound)


def test_empty_dimensions():
    for variant in VARIANTS:
        assert lowprec.matmul_accumulators(np.zeros((0, 5), np.uint8), np.zeros((3, 5), np.uint8),
                                           variant).shape == (0, 3)
        assert lowprec.matmul(np.zeros((2, 5), np.uint8), np.zeros((0, 5), np.uint8), 1.0, 1.0,
                              variant).shape == (2, 0)
        np.testing.assert_array_equal(
            lowprec.matmul_accumulators(np.zeros((2, 0), np.uint8), np.zeros((3, 0), np.uint8), variant),
            np.zeros((2, 3), np.int32))


def test_inside_tf_function():
    rng = np.random.default_rng(23)
    a, b = _codes(rng, (4, 70)), _codes(rng, (5, 70))
    fn = tf.function(lambda a, b: lowprec.matmul(a, b, 0.5, 0.5, "lut8"))
    np.testing.assert_array_equal(fn(tf.constant(a), tf.constant(b)).numpy(),
                                  lref.matmul(a, b, 0.5, 0.5, "lut8"))


U = np.zeros((2, 3), np.uint8)
RAW = load_ops


MISUSE = {
    "a_rank1": lambda: lowprec.matmul_accumulators(np.zeros(3, np.uint8), U, "shift16"),
    "b_rank3": lambda: lowprec.matmul_accumulators(U, np.zeros((1, 2, 3), np.uint8), "lut8"),
    "k_mismatch": lambda: lowprec.matmul(U, np.zeros((2, 4), np.uint8), 1.0, 1.0, "shift16"),
    "kn_k_mismatch": lambda: lowprec.matmul_accumulators(U, np.zeros((4, 2), np.uint8), "lut8", b_layout="kn"),
    "code_16_a": lambda: lowprec.matmul_accumulators(np.full((2, 3), 16, np.uint8), U, "shift16"),
    "code_255_b": lambda: lowprec.matmul(U, np.full((1, 3), 255, np.uint8), 1.0, 1.0, "lut8"),
    "codes_int32": lambda: lowprec.matmul_accumulators(np.zeros((2, 3), np.int32), U, "lut8"),
    "bad_variant": lambda: lowprec.matmul(U, U, 1.0, 1.0, "shift8"),
    "bad_variant_encode": lambda: lowprec.encode(np.ones(3, np.float32), 1.0, "log2"),
    "bad_impl": lambda: lowprec.matmul_accumulators(U, U, "lut8", impl="avx"),
    "bad_layout": lambda: lowprec.matmul_accumulators(U, U, "lut8", b_layout="km"),
    "scale_negative": lambda: lowprec.matmul(U, U, -1.0, 1.0, "shift16"),
    "scale_nan": lambda: lowprec.matmul(U, U, 1.0, float("nan"), "lut8"),
    "scale_inf": lambda: lowprec.matmul(U, U, float("inf"), 1.0, "lut8"),
    "scale_vector": lambda: lowprec.matmul(U, U, [1.0, 2.0], 1.0, "shift16"),
    "k_too_big": lambda: lowprec.matmul_accumulators(np.zeros((1, 131072), np.uint8),
                                                     np.zeros((1, 131072), np.uint8), "shift16"),
    "encode_scale_negative": lambda: lowprec.encode(np.ones(3, np.float32), -2.0, "lut8"),
    "encode_int_input": lambda: lowprec.encode(np.ones(3, np.int32), 1.0, "lut8"),
    "decode_code_16": lambda: lowprec.decode(np.array([16], np.uint8), 1.0, "lut8"),
    # the raw ops, past the Python checks: the kernels' own checks
    "raw_bad_scheme": lambda: RAW().lowprec_mat_mul_accum(U, U, scheme="shift8"),
    "raw_bad_impl": lambda: RAW().lowprec_mat_mul_accum(U, U, scheme="lut8", impl="fast"),
    "raw_rank": lambda: RAW().lowprec_mat_mul_accum(tf.zeros((2, 3, 1), tf.uint8), U, scheme="lut8"),
    "raw_code": lambda: RAW().lowprec_mat_mul(U, U + 200, 1.0, 1.0, scheme="shift16"),
    "raw_scale": lambda: RAW().lowprec_mat_mul(U, U, 1.0, -0.5, scheme="shift16"),
}


@pytest.mark.parametrize("name", sorted(MISUSE))
def test_misuse_raises_invalid_argument(name):
    with pytest.raises(tf.errors.InvalidArgumentError):
        out = MISUSE[name]()
        if isinstance(out, tf.Tensor):
            out.numpy()


@pytest.mark.parametrize("name", ["k_mismatch", "code_16_a", "scale_nan", "a_rank1"])
def test_misuse_inside_tf_function(name):
    """The kernels' checks fire in graph mode too (shapes unknown until run time)."""
    args = {
        "k_mismatch": (U, np.zeros((2, 4), np.uint8), 1.0),
        "code_16_a": (np.full((2, 3), 16, np.uint8), U, 1.0),
        "scale_nan": (U, U, float("nan")),
        "a_rank1": (np.zeros(3, np.uint8), U, 1.0),
    }[name]
    fn = tf.function(lambda a, b, s: lowprec.matmul(a, b, s, 1.0, "lut8"),
                     input_signature=[tf.TensorSpec(None, tf.uint8), tf.TensorSpec(None, tf.uint8),
                                      tf.TensorSpec([], tf.float32)])
    with pytest.raises(tf.errors.InvalidArgumentError):
        fn(*args)
