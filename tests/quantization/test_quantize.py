"""Quantising weights: codes and values equal the NumPy reference for every width and scale
mode, error bounds per bit width, the bias policy, and the size report's arithmetic."""
import numpy as np
import pytest

import tf_nmt  # noqa: F401
from tests.ops import reference as ref
from tf_nmt.quantization.policy import QuantPolicy
from tf_nmt.quantization.quantize import format_report, quantize_weights, size_report

RNG = np.random.default_rng(11)


def weights():
    return (["dense/kernel:0", "dense/bias:0", "emb:0", "step:0"],
            [RNG.standard_normal((40, 30)).astype(np.float32) * 0.1,
             RNG.standard_normal(30).astype(np.float32) * 0.01,
             RNG.standard_normal((50, 8)).astype(np.float32), np.float32(3.0)])


@pytest.mark.parametrize("kind", ["log", "fixed"])
@pytest.mark.parametrize("bits", range(1, 9))
@pytest.mark.parametrize("mode", ["unscaled", "max", "optimised"])
def test_matches_numpy_reference(kind, bits, mode):
    names, arrays = weights()
    policy = QuantPolicy(bits=bits, kind=kind, scale=mode)
    for entry, x in zip(quantize_weights(names, arrays, policy), arrays):
        if not entry.quantized:
            continue
        np.testing.assert_allclose(entry.scale, ref.fit_scale(kind, x, bits, mode), rtol=1e-5)
        np.testing.assert_array_equal(entry.codes, ref.encode(kind, x, entry.scale, bits))
        np.testing.assert_array_equal(entry.dequantize(policy), ref.decode(kind, entry.codes, entry.scale, bits))


@pytest.mark.parametrize("bits", range(1, 9))
def test_error_bounds_per_bit_width(bits):
    x = (RNG.standard_normal(20000) * np.exp(RNG.standard_normal(20000))).astype(np.float32)
    levels = 1 << (bits - 1)
    (log,) = quantize_weights(["x"], [x.reshape(100, 200)], QuantPolicy(bits=bits, scale="max"))
    s = float(np.abs(x).max())
    assert log.scale == s
    err = np.abs(log.dequantize(QuantPolicy(bits=bits)).ravel() - x)
    smallest = s * 2.0 ** -(levels - 1)
    # nearest power of two in normal space: relative error <= 1/3; below the last level, <= it
    assert np.all(err <= np.maximum(np.abs(x) / 3, smallest) * (1 + 1e-6))
    fixed_policy = QuantPolicy(bits=bits, kind="fixed", scale="max")
    (fixed,) = quantize_weights(["x"], [x.reshape(100, 200)], fixed_policy)
    step = s / levels
    err = np.abs(fixed.dequantize(fixed_policy).ravel() - x)
    assert np.all(err <= step * (1 + 1e-6))
    inside = np.abs(x) >= step
    assert np.all(err[inside] <= step / 2 * (1 + 1e-6))


def test_more_bits_never_hurt_the_optimised_log_error():
    x = RNG.standard_normal((200, 100)).astype(np.float32)
    errors = []
    for bits in (1, 2, 3, 4, 8):
        (e,) = quantize_weights(["x"], [x], QuantPolicy(bits=bits))
        errors.append(float(np.mean((e.dequantize(QuantPolicy(bits=bits)) - x) ** 2)))
    # more levels only extend the grid downwards (powers of two), so the gain saturates
    assert errors == sorted(errors, reverse=True) and errors[-1] < 0.2 * errors[0]


def test_policy_keeps_vectors_and_scalars_unless_asked():
    names, arrays = weights()
    kept = quantize_weights(names, arrays, QuantPolicy())
    assert [e.quantized for e in kept] == [True, False, True, False]
    np.testing.assert_array_equal(kept[1].values, arrays[1])
    both = quantize_weights(names, arrays, QuantPolicy(quantize_biases=True))
    assert [e.quantized for e in both] == [True, True, True, False]
    with pytest.raises(ValueError, match="1..8"):
        QuantPolicy(bits=0)
    with pytest.raises(ValueError, match="scale"):
        QuantPolicy(scale="mean")


def test_size_report():
    names, arrays = weights()
    policy = QuantPolicy(bits=4)
    report = size_report(quantize_weights(names, arrays, policy), policy, arrays)
    rows = report["tensors"]
    assert [r["stored_bytes"] for r in rows] == [600 + 4, 30 * 4, 200 + 4, 4]
    assert rows[1]["relative_error"] == 0.0 and 0 < rows[0]["relative_error"] < 0.35
    total = report["total"]
    assert total["fp32_bytes"] == 4 * (1200 + 30 + 400 + 1)
    assert total["ratio"] == pytest.approx(total["fp32_bytes"] / (604 + 120 + 204 + 4))
    assert "total: 1,631 params (1,600 quantised)" in format_report(report)
