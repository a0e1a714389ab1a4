"""Misuse raises InvalidArgumentError (eager, and inside tf.function), never crashes."""
import numpy as np
import pytest

import tf_nmt  # noqa: F401
from tf_nmt import ops
from tf_nmt.compat import tf
from tf_nmt.ops.loader import load_ops

G = np.ones((4, 5), np.float32)
X = np.linspace(-1, 1, 20).astype(np.float32)

CASES = {
    "shape_mismatch": lambda: ops.grad_drop(G, np.ones((5, 4), np.float32), 0.9),
    "size_mismatch": lambda: ops.grad_drop(G, np.ones((3,), np.float32), 0.9),
    "ratio_one": lambda: ops.grad_drop(G, G, 1.0),
    "ratio_negative": lambda: ops.grad_drop(G, G, -0.1),
    "ratio_nan": lambda: ops.grad_drop(G, G, float("nan")),
    "ratio_not_scalar": lambda: ops.grad_drop(G, G, [0.5, 0.5]),
    "fraction_zero": lambda: ops.grad_drop(G, G, 0.5, sample_fraction=0.0),
    "fraction_big": lambda: ops.grad_drop(G, G, 0.5, sample_fraction=1.5),
    "int_gradient": lambda: ops.grad_drop(tf.ones((4, 5), tf.int32), tf.ones((4, 5), tf.int32), 0.5),
    "float64_gradient": lambda: ops.grad_drop(G.astype(np.float64), G.astype(np.float64), 0.5),
    "mixed_dtypes": lambda: ops.grad_drop(G, tf.cast(G, tf.float16), 0.5),
    "global_lengths": lambda: ops.grad_drop_global([G, G], [G], 0.5),
    "global_shape": lambda: ops.grad_drop_global([G, X], [G, G], 0.5),
    "global_dtypes": lambda: ops.grad_drop_global([G, tf.cast(G, tf.float16)], [G, tf.cast(G, tf.float16)], 0.5),
    "one_bit_index_range": lambda: ops.one_bit_quantize([0, 99], [1.0, 2.0], G),
    "one_bit_negative_index": lambda: ops.one_bit_quantize([-1], [1.0], G),
    "one_bit_lengths": lambda: ops.one_bit_quantize([0, 1], [1.0], G),
    "bits_zero": lambda: ops.log_quantize(X, 0),
    "bits_nine": lambda: ops.LOG.encode(X, 1.0, 9),
    "bits_tensor": lambda: ops.FIXED.quantize(X, tf.constant(12)),
    "bits_not_scalar": lambda: ops.LOG.quantize(X, tf.constant([4, 4])),
    "quant_int_input": lambda: ops.log_quantize(tf.range(5), 4),
    "scale_negative": lambda: ops.LOG.encode(X, -1.0, 4),
    "scale_nan": lambda: ops.FIXED.encode(X, float("nan"), 4),
    "decode_code_too_big": lambda: ops.LOG.decode(np.array([16], np.uint8), 1.0, 4),
    "decode_not_uint8": lambda: ops.LOG.decode(np.array([1], np.int32), 1.0, 4),
    "mode": lambda: ops.log_quantize(X, 4, mode="bogus"),
    "raw_mode_attr": lambda: load_ops().log_quantize(X, 4, mode="bogus"),
    "pack_big_code": lambda: ops.pack_nibbles(np.array([3, 17], np.uint8)),
    "unpack_size": lambda: ops.unpack_nibbles(np.array([1, 2], np.uint8), 7),
    "unpack_negative": lambda: ops.unpack_nibbles(np.array([1], np.uint8), -1),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_misuse_raises_invalid_argument(case):
    with pytest.raises(tf.errors.InvalidArgumentError):
        CASES[case]()


def test_dynamic_shape_mismatch_inside_tf_function():
    spec = tf.TensorSpec(None, tf.float32)
    fn = tf.function(lambda g, r: ops.grad_drop(g, r, 0.9), input_signature=[spec, spec])
    with pytest.raises(tf.errors.InvalidArgumentError):
        fn(tf.ones([3]), tf.ones([4]))
    ratio_fn = tf.function(lambda r: ops.grad_drop(G, G, r), input_signature=[tf.TensorSpec([], tf.float32)])
    with pytest.raises(tf.errors.InvalidArgumentError):
        ratio_fn(tf.constant(2.0))
    bits_fn = tf.function(lambda b: ops.log_quantize(X, b), input_signature=[tf.TensorSpec([], tf.int32)])
    with pytest.raises(tf.errors.InvalidArgumentError):
        bits_fn(tf.constant(0))


def test_missing_library_gives_build_hint(monkeypatch, tmp_path):
    from tf_nmt.ops import loader

    monkeypatch.setenv("TF_NMT_OPS_LIBRARY", str(tmp_path / "nope.so"))
    loader.load_ops.cache_clear()
    try:
        with pytest.raises(ImportError, match="pip install --no-build-isolation -e ."):
            loader.load_ops()
        assert not loader.ops_available()
    finally:
        monkeypatch.delenv("TF_NMT_OPS_LIBRARY")
        loader.load_ops.cache_clear()
    assert loader.ops_available()
