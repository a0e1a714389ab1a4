"""The Table 7.5 microbenchmark ops (experiments/lowprec/bench_ops.py): built into a library of
their own from a checkout, they time every method on both dispatch paths, refuse bad arguments,
honour $TF_NMT_LOWPREC_SCALAR like the production kernels, and the lowprec-kernels study runs
end to end on them."""
import json

import pytest

from experiments.lowprec import bench_ops
from tf_nmt.compat import tf
from tf_nmt.ops import lowprec


def test_built_into_its_own_library_under_build():
    library = bench_ops.build()
    assert library == bench_ops.ROOT / "build" / "lowprec_bench" / "_lowprec_bench_ops.so"
    assert library.is_file() and not bench_ops.needs_build(bench_ops._build_ops())
    assert hasattr(bench_ops.load_bench_ops(), "lowprec_bench_mat_mul")


@pytest.mark.parametrize("method", bench_ops.METHODS)
@pytest.mark.parametrize("impl", ["scalar", "auto"])
def test_bench_ops_run(method, impl):
    assert bench_ops.bench_dot(method, pairs=4, reps=50, impl=impl) > 0
    assert bench_ops.bench_matmul(method, 3, 70, 5, reps=2, impl=impl) > 0


MISUSE = {
    "bench_method": lambda: bench_ops.bench_dot("int4"),
    "bench_impl": lambda: bench_ops.bench_matmul("lut8", 1, 1, 1, reps=1, impl="avx"),
    "bench_pairs_zero": lambda: bench_ops.bench_dot("fp32", pairs=0, reps=1),
    "bench_reps_zero": lambda: bench_ops.bench_dot("fp32", pairs=1, reps=0),
    "bench_k_zero": lambda: bench_ops.bench_matmul("lut8", 1, 0, 1, reps=1),
    "bench_too_large": lambda: bench_ops.bench_matmul("fp32", 1 << 16, 8192, 1 << 14, reps=1),
}


@pytest.mark.parametrize("name", sorted(MISUSE))
def test_misuse_raises_invalid_argument(name):
    with pytest.raises(tf.errors.InvalidArgumentError):
        MISUSE[name]()


def test_env_var_forces_scalar_path(monkeypatch):
    """$TF_NMT_LOWPREC_SCALAR=1 makes impl='auto' run the scalar loop: the bench ops dispatch
    through the production kernels' ResolveImpl (lowprec_impl_attr.h), whose answer
    LowprecResolveImpl reports, and still run under it. No timing: runs on any CPU."""
    monkeypatch.delenv(lowprec.FORCE_SCALAR_ENV, raising=False)  # the suite may run with it set
    free = lowprec.resolved_impl("auto")
    assert free == ("simd" if lowprec.simd_available() else "scalar")
    monkeypatch.setenv(lowprec.FORCE_SCALAR_ENV, "1")
    assert lowprec.scalar_forced_by_env() and lowprec.resolved_impl("auto") == "scalar"
    assert bench_ops.bench_dot("lut8", pairs=4, reps=50) > 0
    assert bench_ops.bench_matmul("lut8", 3, 70, 5, reps=2) > 0
    monkeypatch.setenv(lowprec.FORCE_SCALAR_ENV, "0")
    assert not lowprec.scalar_forced_by_env() and lowprec.resolved_impl("auto") == free


def test_benchmark_study_quick(tmp_path):
    """The Table 7.5 benchmark runs end to end and writes its JSON (numbers meaningless here)."""
    from experiments.lowprec import kernels as lowprec_bench

    out = tmp_path / "lp.json"
    assert lowprec_bench.main(["--quick", "--no-tf", "--tokens", "4", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["complete"] and set(result["dot"]["summary"]) == set(bench_ops.METHODS)
    assert len(result["matmul"]) == len(lowprec_bench.SHAPES)
    assert all(v > 0 for row in result["matmul"] for v in row["gflops_median"].values())
