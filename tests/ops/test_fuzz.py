"""Hypothesis fuzzing over shapes and values: reference agreement and mass conservation."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tf_nmt  # noqa: F401
from tf_nmt import ops
from tests.ops import reference as ref

FLOATS = st.floats(width=32, allow_nan=True, allow_infinity=True)
ARRAYS = hnp.arrays(np.float32, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=9), elements=FLOATS)


@settings(max_examples=60, deadline=None)
@given(ARRAYS, st.floats(0.0, 0.999999), st.integers(0, 2**40))
def test_grad_drop_fuzz(g, ratio, seed):
    r = np.roll(g.ravel(), 1).reshape(g.shape) * np.float32(0.5) if g.size else g.copy()
    total = ref.ftz_sum(g, r)
    indices, values, new_residual, thr = ops.grad_drop(g, r, ratio, seed=seed, return_threshold=True)
    want = ref.threshold_exact(total, ratio)
    assert float(thr) == want or (np.isinf(want) and np.isinf(float(thr)))
    idx, val, res = ref.grad_drop(g, r, want)
    np.testing.assert_array_equal(indices.numpy(), idx)
    np.testing.assert_array_equal(new_residual.numpy(), res)
    dense = np.zeros(total.size, np.float32)
    dense[indices.numpy()] = values.numpy()
    np.testing.assert_array_equal(dense + new_residual.numpy().ravel(), total.ravel())


@settings(max_examples=60, deadline=None)
@given(ARRAYS, st.integers(1, 8), st.sampled_from(["log", "fixed"]), st.sampled_from(["unscaled", "max", "optimised"]))
def test_quantize_fuzz(x, bits, kind, mode):
    q = ops.LOG if kind == "log" else ops.FIXED
    codes, scale = q.quantize(x, bits, mode)
    scale = float(scale)
    assert np.isfinite(scale) and scale >= 0
    np.testing.assert_allclose(scale, ref.fit_scale(kind, x, bits, mode), rtol=1e-5)
    np.testing.assert_array_equal(codes.numpy(), ref.encode(kind, x, scale, bits))
    y = q.decode(codes, scale, bits).numpy()
    np.testing.assert_array_equal(y, ref.decode(kind, codes.numpy(), scale, bits))
    assert codes.shape == x.shape and (codes.numpy() < (1 << bits)).all()
