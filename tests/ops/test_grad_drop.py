"""GradDrop / GradDropGlobal against the NumPy reference, including adversarial inputs."""
import math

import numpy as np
import pytest

import tf_nmt  # noqa: F401
from tf_nmt import ops
from tf_nmt.compat import tf
from tests.ops import reference as ref

RNG = np.random.default_rng(0)


def _pair(shape, scale=1.0):
    g = (RNG.standard_normal(shape) * scale).astype(np.float32)
    r = (RNG.standard_normal(shape) * 0.1 * scale).astype(np.float32)
    return g, r


def _check_exact(g, r, ratio):
    indices, values, new_residual, thr = ops.grad_drop(g, r, ratio, exact_below=10**9, return_threshold=True)
    want_thr = ref.threshold_exact(ref.ftz_sum(g, r), ratio)
    assert float(thr) == want_thr or (math.isinf(want_thr) and math.isinf(float(thr)))
    idx, val, res = ref.grad_drop(g, r, want_thr)
    np.testing.assert_array_equal(indices.numpy(), idx)
    np.testing.assert_array_equal(values.numpy(), val)
    np.testing.assert_array_equal(new_residual.numpy(), res)
    return indices.numpy(), values.numpy(), new_residual.numpy()


def _assert_mass(g, r, indices, values, new_residual):
    dense = np.zeros(g.size, g.dtype)
    dense[indices] = values
    total = ref.ftz_sum(g, r).ravel()
    got = dense + new_residual.ravel()
    np.testing.assert_array_equal(got, total)  # exact; NaN compares equal to NaN


@pytest.mark.parametrize("shape", [(7,), (33, 17), (4, 5, 6), (70000,)])
@pytest.mark.parametrize("ratio", [0.0, 0.5, 0.9, 0.99, 0.999999])
def test_exact_matches_reference(shape, ratio):
    g, r = _pair(shape)
    indices, values, new_residual = _check_exact(g, r, ratio)
    n = g.size
    assert len(indices) == n - min(math.floor(float(np.float32(ratio)) * n), n - 1)  # R as float32
    _assert_mass(g, r, indices, values, new_residual)


def test_small_tensor_uses_exact_selection_by_default():
    g, r = _pair((100, 100))
    _, values, _ = ops.grad_drop(g, r, 0.99)
    assert values.shape[0] == 100


def test_sampled_threshold_keeps_about_the_right_fraction_and_conserves_mass():
    g, r = _pair((1 << 20) + 3)
    indices, values, new_residual, thr = ops.grad_drop(g, r, 0.99, sample_fraction=0.01, seed=3,
                                                       return_threshold=True)
    kept = indices.shape[0] / g.size
    assert 0.008 < kept < 0.012
    idx, val, res = ref.grad_drop(g, r, float(thr))  # same split as the reference for this threshold
    np.testing.assert_array_equal(indices.numpy(), idx)
    np.testing.assert_array_equal(new_residual.numpy(), res)
    _assert_mass(g, r, indices.numpy(), values.numpy(), new_residual.numpy())
    again = ops.grad_drop(g, r, 0.99, sample_fraction=0.01, seed=3, return_threshold=True)[3]
    assert float(again) == float(thr)  # deterministic for a seed


@pytest.mark.parametrize("fill", [0.0, 1.5, -2.0])
def test_all_equal_values_are_all_kept(fill):
    g = np.full((1000,), fill, np.float32)
    indices, values, new_residual = _check_exact(g, np.zeros_like(g), 0.99)
    assert len(indices) == 1000 and not new_residual.any()


def test_all_zeros_with_zero_ratio_keeps_everything():
    g = np.zeros((50,), np.float32)
    indices, _, _ = _check_exact(g, g.copy(), 0.0)
    assert len(indices) == 50


def test_empty_tensor():
    g = np.zeros((0, 3), np.float32)
    indices, values, new_residual = ops.grad_drop(g, g, 0.9)
    assert indices.shape == (0,) and values.shape == (0,) and new_residual.shape == (0, 3)


def test_nan_never_kept_inf_always_kept():
    g, r = _pair((1000,))
    g[[3, 50]] = np.nan
    g[[7]] = np.inf
    g[[9]] = -np.inf
    indices, values, new_residual = _check_exact(g, r, 0.99)
    assert 7 in indices and 9 in indices and 3 not in indices
    assert np.isnan(new_residual[[3, 50]]).all()
    _assert_mass(g, r, indices, values, new_residual)


def test_all_nan_keeps_nothing():
    g = np.full((10,), np.nan, np.float32)
    indices, _, new_residual = ops.grad_drop(g, np.zeros_like(g), 0.5)
    assert indices.shape == (0,) and np.isnan(new_residual.numpy()).all()


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16])
def test_half_precision_types(dtype):
    g, r = _pair((3000,))
    gt, rt = tf.cast(g, dtype), tf.cast(r, dtype)
    indices, values, new_residual = ops.grad_drop(gt, rt, 0.9)
    assert values.dtype == dtype and new_residual.dtype == dtype
    total = (gt + rt).numpy().astype(np.float32)
    dense = ops.densify(indices, values, [3000]).numpy().astype(np.float32)
    np.testing.assert_array_equal(dense + new_residual.numpy().astype(np.float32), total)
    assert indices.shape[0] >= 300


def test_global_threshold_is_shared_and_per_tensor_mode_differs():
    big, small = _pair((200, 50)), _pair((300,), scale=0.01)
    out = ops.grad_drop_global([big[0], small[0]], [big[1], small[1]], 0.9, exact_below=10**9)
    total = np.concatenate([(big[0] + big[1]).ravel(), small[0] + small[1]])
    thr = ref.threshold_exact(total, 0.9)
    for (g, r), (indices, values, new_residual) in zip([big, small], out):
        idx, val, res = ref.grad_drop(g, r, thr)
        np.testing.assert_array_equal(indices.numpy(), idx)
        np.testing.assert_array_equal(new_residual.numpy(), res)
    assert out[1][0].shape[0] == 0  # the small-scale tensor loses everything to the global threshold
    per_tensor = ops.grad_drop_global([big[0], small[0]], [big[1], small[1]], 0.9, per_tensor=True)
    assert per_tensor[1][0].shape[0] == 300 - math.floor(float(np.float32(0.9)) * 300)  # 31


def test_global_sampled_over_many_tensors():
    pairs = [_pair((n,)) for n in (40000, 70000, 5, 0, 90000)]
    out = ops.grad_drop_global([p[0] for p in pairs], [p[1] for p in pairs], 0.99, sample_fraction=0.1,
                               exact_below=1000)
    kept = sum(o[0].shape[0] for o in out)
    assert 0.007 < kept / 200005 < 0.013
    for (g, r), (indices, values, new_residual) in zip(pairs, out):
        _assert_mass(g, r, indices.numpy(), values.numpy(), new_residual.numpy())


def test_inside_tf_function():
    fn = tf.function(lambda g, r: ops.grad_drop(g, r, 0.9))
    g, r = _pair((64, 64))
    indices, _, new_residual = fn(tf.constant(g), tf.constant(r))
    assert indices.shape[0] == 410 and new_residual.shape == (64, 64)


def test_huge_tensor_sampled():
    g = RNG.standard_normal((1 << 24) + 5, dtype=np.float32)
    indices, values, new_residual = ops.grad_drop(g, np.zeros_like(g), 0.99)
    assert 0.008 < indices.shape[0] / g.size < 0.012
    assert indices.numpy()[-1] < g.size and np.all(np.diff(indices.numpy()) > 0)
    _assert_mass(g, np.zeros_like(g), indices.numpy(), values.numpy(), new_residual.numpy())


def test_forwarded_residual_buffer_gives_same_result():
    g, r = _pair((300, 400))
    fn = tf.function(lambda g, r: ops.grad_drop(g, r * 1.0, 0.99, exact_below=10**9))  # r * 1 can be reused in place
    indices, values, new_residual = fn(tf.constant(g), tf.constant(r))
    idx, val, res = ref.grad_drop(g, r, ref.threshold_exact(ref.ftz_sum(g, r), 0.99))
    np.testing.assert_array_equal(indices.numpy(), idx)
    np.testing.assert_array_equal(values.numpy(), val)
    np.testing.assert_array_equal(new_residual.numpy(), res)
