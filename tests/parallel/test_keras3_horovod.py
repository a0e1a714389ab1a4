"""Real ``horovodrun -np 2`` (Gloo) with Keras 3 (``import keras``, ``TF_USE_LEGACY_KERAS``
unset in the ranks' environment): :mod:`horovod_patches.keras3` averages the gradients of a
user's own model, broadcasts the initial state, averages epoch logs and warms the rate up.

One launch runs every scenario (workers/keras3_hvd.py); each test checks one of them.

Tolerance against the one-process reference: ``atol=1e-5`` on weights of size ~0.1-1 after 8-16
SGD steps. The reference sees exactly the same samples per update, so the only difference is
the float32 summation order (two half-batch means averaged by the allreduce instead of one
mean over the whole batch): ~1e-7 relative per step. A run that does not average differs by
~1e-2 (checked below), three orders of magnitude above the tolerance.

``KERAS3_HVD_PLANT=1`` plants the trap (the "average" scenario trains with the plain optimizer);
then ``test_ranks_identical_and_match_one_process`` fails.

Mixed precision has its own launch (workers/keras3_precision.py): float16 loss scaling with an
overflow planted on rank 1 only, and bfloat16. ``KERAS3_FP16_PLANT=stock`` gives the ranks Keras
3's own per-rank overflow check (the deadlock this guards: the launch does not finish, or ends
with the ranks apart); ``KERAS3_FP16_PLANT=nocount`` stops tf-nmt's loss scale counting a
skipped batch in ``iterations``.
"""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.parallel import launch
from tests.parallel.workers.keras3_precision import OVERFLOW_AT, PLANT_VAR, STEPS

pytestmark = [pytest.mark.parallel, pytest.mark.slow]

if not launch.horovod_importable():
    pytest.skip("horovod.tensorflow is not importable: build it with scripts/install_horovod.sh",
                allow_module_level=True)

ATOL = 1e-5
WORKER = launch.WORKERS / "keras3_hvd.py"


def keras3_env() -> dict:
    """The ranks' environment: this one without TF_USE_LEGACY_KERAS (Keras 3), one thread."""
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    env.update(OMP_NUM_THREADS="1", TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1",
               TF_CPP_MIN_LOG_LEVEL="2")
    return env


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("keras3")
    cmd = [str(Path(sys.executable).parent / "horovodrun"), "-np", "2", "-H", "localhost:2",
           "--gloo", sys.executable, str(WORKER), "--out", str(out)]
    if os.environ.get("KERAS3_HVD_PLANT") == "1":
        cmd.append("--plant")
    proc = subprocess.run(cmd, cwd=launch.REPO, env=keras3_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = {r: json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)}
    arrays = {r: dict(np.load(out / f"rank{r}.npz")) for r in (0, 1)}
    return res, arrays


def weights(arrays, rank, name):
    keys = sorted((k for k in arrays[rank] if k.startswith(f"{name}/w")),
                  key=lambda k: int(k.split("/w")[1]))
    assert keys, name
    return [arrays[rank][k] for k in keys]


def max_diff(a, b):
    assert len(a) == len(b)
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))


def bit_identical(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def test_ranks_run_keras3_with_sparse_embedding_gradients(runs):
    res, _ = runs
    for r in (0, 1):
        assert res[r]["keras"].startswith("3."), res[r]["keras"]
        assert res[r]["legacy_env"] is None and res[r]["tf_keras_is_keras3"]
        assert res[r]["size"] == 2
    assert res[0]["grad_types"][0] == "IndexedSlices", res[0]["grad_types"]


def test_ranks_identical_and_match_one_process(runs):
    res, arrays = runs
    w0, w1 = weights(arrays, 0, "average"), weights(arrays, 1, "average")
    assert bit_identical(w0, w1), f"ranks differ by {max_diff(w0, w1):.3g}"
    opt0 = [arrays[0][k] for k in sorted(arrays[0]) if k.startswith("average/opt")]
    opt1 = [arrays[1][k] for k in sorted(arrays[1]) if k.startswith("average/opt")]
    assert opt0 and bit_identical(opt0, opt1)  # momentum and counters too
    assert res[0]["average"]["iterations"] == 16  # 2 epochs x 8 updates
    ref = weights(arrays, 0, "ref_average")
    assert max_diff(w0, ref) < ATOL, max_diff(w0, ref)
    # the averaged epoch loss is the loss of the one-process run on the global batches
    np.testing.assert_allclose(res[0]["average"]["avg_loss"], res[0]["ref_average"]["loss"],
                               rtol=1e-5)


def test_broadcast_makes_different_starts_equal(runs):
    res, arrays = runs
    assert not np.array_equal(arrays[0]["average/init0"], arrays[1]["average/init0"])
    # without the broadcast the same averaged updates keep the two starts apart
    apart = max_diff(weights(arrays, 0, "no_broadcast"), weights(arrays, 1, "no_broadcast"))
    assert apart > 1e-2, apart


def test_plain_optimizer_diverges(runs):
    """The trap, proven: the same start, different data, no averaging -> different models."""
    _, arrays = runs
    w0, w1 = weights(arrays, 0, "plain"), weights(arrays, 1, "plain")
    assert max_diff(w0, w1) > 1e-3, max_diff(w0, w1)
    # and the averaged run (same data, same start, one epoch) is far from the plain one
    assert max_diff(weights(arrays, 0, "sparse"), w0) > 1e-3


def test_sparse_gradients_as_indexed_slices(runs):
    _, arrays = runs
    w0, w1 = weights(arrays, 0, "sparse"), weights(arrays, 1, "sparse")
    assert bit_identical(w0, w1), max_diff(w0, w1)
    ref = weights(arrays, 0, "ref_one_epoch")
    assert max_diff(w0, ref) < ATOL, max_diff(w0, ref)


def test_accumulation_equals_one_larger_batch(runs):
    """2 passes of batch b on each of 2 ranks == one pass of batch 4b in one process."""
    res, arrays = runs
    w0, w1 = weights(arrays, 0, "accumulate"), weights(arrays, 1, "accumulate")
    assert bit_identical(w0, w1), max_diff(w0, w1)
    ref = weights(arrays, 0, "ref_one_epoch")
    assert max_diff(w0, ref) < ATOL, max_diff(w0, ref)
    assert res[0]["accumulate"]["backward_passes"] == 16
    assert res[0]["accumulate"]["iterations"] == 8  # updates, not batches


def test_metric_average(runs):
    res, _ = runs
    local = [res[r]["average"]["local_loss"] for r in (0, 1)]
    assert local[0] != local[1]  # different data per rank
    mean = np.mean(local, axis=0)
    for r in (0, 1):
        np.testing.assert_allclose(res[r]["average"]["avg_loss"], mean, rtol=1e-12)
        assert res[r]["average"]["history_loss"] == res[r]["average"]["avg_loss"]


def test_learning_rate_warmup(runs):
    res, _ = runs
    lr = 0.1
    expected = [lr / 2 + (lr - lr / 2) * min(1, s / 4) for s in range(8)]
    for r in (0, 1):
        np.testing.assert_allclose(res[r]["warmup_lrs"], expected, rtol=1e-6)


def test_upstream_horovod_keras_is_the_trap(runs):
    """Why this package exists, pinned for Horovod 0.28.1: under Keras 3 its own
    DistributedOptimizer trains from the same start without averaging (ranks drift apart) and
    its broadcast callback crashes. If a Horovod upgrade fixes either, this test says so."""
    res, arrays = runs
    w0, w1 = weights(arrays, 0, "upstream"), weights(arrays, 1, "upstream")
    assert max_diff(w0, w1) > 1e-3, max_diff(w0, w1)
    assert res[0]["upstream_broadcast_error"], "upstream broadcast callback did not crash"


def test_example_script_trains(tmp_path):
    script = Path(launch.REPO) / "horovod_patches" / "keras3" / "examples" / "train_mnist_like.py"
    cmd = [str(Path(sys.executable).parent / "horovodrun"), "-np", "2", "-H", "localhost:2",
           "--gloo", sys.executable, str(script), "--samples", "512", "--epochs", "2",
           "--accumulate", "2", "--save", str(tmp_path / "model.keras")]
    proc = subprocess.run(cmd, cwd=launch.REPO, env=keras3_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "ranks=2" in proc.stdout and "updates=8" in proc.stdout, proc.stdout[-2000:]
    assert (tmp_path / "model.keras").is_file()


# --- mixed precision ---------------------------------------------------------------------------
PRECISION_TIMEOUT_S = 240  # the launch takes ~25 s alone; a deadlocked one never ends
FP16 = ("fp16_user", "fp16_accumulate", "fp16_tfnmt")
BF16 = ("bf16_user", "bf16_tfnmt")


@pytest.fixture(scope="module")
def precision_runs(tmp_path_factory):
    """One ``horovodrun -np 2`` of workers/keras3_precision.py, ended with its ranks if it has
    not finished after PRECISION_TIMEOUT_S. (With the defect planted the ranks wait on each
    other idle, and Horovod's stall check reports nothing: only a timeout ends it.)"""
    out = tmp_path_factory.mktemp("keras3_precision")
    env = keras3_env()
    env["TF_NMT_KERAS"] = "3"
    if os.environ.get(PLANT_VAR):
        env[PLANT_VAR] = os.environ[PLANT_VAR]
    cmd = [str(Path(sys.executable).parent / "horovodrun"), "-np", "2", "-H", "localhost:2",
           "--gloo", sys.executable, str(launch.WORKERS / "keras3_precision.py"),
           "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=launch.REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=PRECISION_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)  # horovodrun ends its ranks
        try:
            output, _ = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"deadlock: the job had not ended after {PRECISION_TIMEOUT_S} s\n"
                    + output[-3000:])
    assert proc.returncode == 0, output[-4000:]
    res = {r: json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)}
    arrays = {r: dict(np.load(out / f"rank{r}.npz")) for r in (0, 1)}
    return res, arrays


def optimizer_state(arrays, rank, name):
    """The optimizer's variables but the accumulators (which hold each rank's own gradients
    until the next update)."""
    keys = sorted((k for k in arrays[rank] if k.startswith(f"{name}/optimizer/")
                   and "accumulator" not in k), key=lambda k: int(k.split("/")[2]))
    assert keys, name
    return [arrays[rank][k] for k in keys]


def assert_ranks_identical(arrays, name):
    w0, w1 = arrays[0][f"{name}/weights"], arrays[1][f"{name}/weights"]
    assert np.isfinite(w0).all() and np.isfinite(w1).all()
    assert np.array_equal(w0, w1), f"{name}: ranks differ by {max_diff([w0], [w1]):.3g}"
    s0, s1 = optimizer_state(arrays, 0, name), optimizer_state(arrays, 1, name)
    assert bit_identical(s0, s1), f"{name}: optimizer states differ by {max_diff(s0, s1):.3g}"


@pytest.mark.parametrize("name", FP16)
def test_fp16_overflow_on_one_rank_is_skipped_on_both(precision_runs, name):
    """Rank 1 alone overflows at batch OVERFLOW_AT: both ranks skip that batch, halve the same
    loss scale, finish, and end bit-identical."""
    res, arrays = precision_runs
    for r in (0, 1):
        assert res[r][name]["class"] == "horovod_patches.keras3.loss_scale.LossScaleOptimizer"
        assert res[r][name]["inner_class"] == "DistributedOptimizer"
        assert res[r][f"{name}_compute_dtype"] == "float16"
    steps = [res[r][name] for r in (0, 1)]
    assert steps[0]["scale"] == steps[1]["scale"]
    assert steps[0]["iterations"] == steps[1]["iterations"]
    scale = [2.0 ** 15] + steps[0]["scale"]
    skipped = [i for i in range(len(scale) - 1) if scale[i + 1] == scale[i] / 2]
    assert OVERFLOW_AT in skipped, steps[0]["scale"]
    # the overflow was rank 1's alone: rank 0's loss stayed small, rank 1's mean took the boost
    assert max(steps[0]["loss_mean"]) < 10 and steps[1]["loss_mean"][OVERFLOW_AT] > 1e6
    iterations = [0] + steps[0]["iterations"]
    if name == "fp16_user":  # Keras 3's count: applied steps only
        assert [iterations[i + 1] - iterations[i] for i in range(STEPS)] == \
            [0 if i in skipped else 1 for i in range(STEPS)]
    elif name == "fp16_accumulate":  # a skipped batch is no backward pass, on either rank
        for r in (0, 1):
            assert res[r][name]["backward_passes"] == 2 * STEPS - len(skipped)
    else:  # tf-nmt counts every batch, as on Keras 2 (the resumed run's data skip)
        assert steps[0]["iterations"] == list(range(1, STEPS + 1))
    assert_ranks_identical(arrays, name)


@pytest.mark.parametrize("name", BF16)
def test_bf16_ranks_identical_without_loss_scaling(precision_runs, name):
    res, arrays = precision_runs
    for r in (0, 1):
        assert res[r][name]["class"] == "horovod_patches.keras3.optimizer.DistributedOptimizer"
        assert res[r][f"{name}_compute_dtype"] == "bfloat16"
        assert res[r][name]["iterations"] == list(range(1, STEPS + 1))
    assert res[0][name]["loss_mean"] != res[1][name]["loss_mean"]  # each rank its own data
    assert_ranks_identical(arrays, name)


def test_fp16_loss_scale_config_and_refusals(precision_runs):
    """The loss scale deserialises as itself (a saved model restores the agreed check and its
    settings); a non-Keras-3 optimizer or a second loss scale is refused."""
    res, _ = precision_runs
    assert res[0]["restored"] == {
        "class": "horovod_patches.keras3.loss_scale.LossScaleOptimizer",
        "inner": "DistributedOptimizer", "count_skipped_steps": True, "initial_scale": 2.0 ** 10}
    type_error, nested = res[0]["refused"]
    assert type_error and type_error.startswith("TypeError") and "Keras 3 optimizer" in type_error
    assert nested and nested.startswith("ValueError") and "already a LossScaleOptimizer" in nested
