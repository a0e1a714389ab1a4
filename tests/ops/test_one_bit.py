"""1-bit stacking on GradDrop output against a NumPy reference."""
import numpy as np

import tf_nmt  # noqa: F401
from tf_nmt import ops

RNG = np.random.default_rng(1)


def _reference(indices, values, residual, columns):
    cols = indices % columns
    pos = np.array([values[(cols == c) & (values > 0)].astype(np.float64).mean() if ((cols == c) & (values > 0)).any() else 0.0 for c in range(columns)], np.float32)
    neg = np.array([values[(cols == c) & (values < 0)].astype(np.float64).mean() if ((cols == c) & (values < 0)).any() else 0.0 for c in range(columns)], np.float32)
    q = np.where(values > 0, pos[cols], np.where(values < 0, neg[cols], values))
    res = residual.ravel().copy()
    res[indices] += values - q
    return q, res.reshape(residual.shape), pos, neg


def test_matches_reference_2d_and_conserves_mass():
    g = RNG.standard_normal((64, 8)).astype(np.float32)
    r = np.zeros_like(g)
    indices, values, residual = ops.grad_drop(g, r, 0.8)
    q, new_res, pos, neg = ops.one_bit_quantize(indices, values, residual)
    want = _reference(indices.numpy(), values.numpy(), residual.numpy(), 8)
    for got, exp in zip((q, new_res, pos, neg), want):
        np.testing.assert_allclose(got.numpy(), exp, rtol=1e-6, atol=1e-7)
    assert len(np.unique(q.numpy())) <= 16
    dense = ops.densify(indices, q, g.shape).numpy() + new_res.numpy()
    np.testing.assert_allclose(dense, g + r, rtol=0, atol=1e-6)


def test_one_dimensional_tensor_is_one_column():
    g = RNG.standard_normal((1000,)).astype(np.float32)
    indices, values, residual = ops.grad_drop_one_bit(g, np.zeros_like(g), 0.9)
    assert len(np.unique(values.numpy())) == 2
    np.testing.assert_allclose(ops.densify(indices, values, g.shape).numpy() + residual.numpy(), g, atol=1e-6)


def test_num_columns_rule():
    assert ops.num_columns([]) == 1 and ops.num_columns([5]) == 1
    assert ops.num_columns([4, 3]) == 3 and ops.num_columns([2, 4, 7]) == 7
