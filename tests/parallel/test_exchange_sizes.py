"""Real ``horovodrun -np 2`` (Gloo): the bytes the accumulation study measures are the sizes of
the tensors Horovod exchanges -- sparse (allgather) vs dense (allreduce) -- and the averaged
gradients are Horovod's own (DistributedGradientTape) and the mean of the ranks' gradients."""
import numpy as np
import pytest

from tests.parallel import launch
from experiments.lib.timeline import bytes_by_kind, read_timeline

pytestmark = [pytest.mark.parallel, pytest.mark.slow]

if not launch.horovod_importable():
    pytest.skip("horovod.tensorflow is not importable: build it with scripts/install_horovod.sh",
                allow_module_level=True)

DIM, VOCAB = 8, 29


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("exchange")
    return out, launch.horovodrun("exchange_sizes.py", out, controller="gloo", np=2,
                                 env=launch.KERAS2)


def emb_record(res, mode):
    return res[mode][res["embedding_index"]]


def test_sparse_embedding_is_allgathered_with_summed_slices(run):
    _, results = run
    slices = []
    for rank in (0, 1):
        res = results[rank]["untied"]
        rec = emb_record(res, "off")
        assert rec["collective"] == "allgather" and rec["sent"]["sparse"]
        rows = res["looked_up_ids"]
        index_bytes = rec["sent"]["nbytes"] - rows * DIM * 4
        assert rec["sent"]["rows"] == rows and index_bytes in (rows * 4, rows * 8)
        slices.append(rec["sent"]["nbytes"])
    assert slices[0] != slices[1]  # the ranks' batches differ in size
    for rank in (0, 1):
        rec = emb_record(results[rank]["untied"], "off")
        assert rec["result"]["nbytes"] == sum(slices)  # accumulated buffer = sum of slices
        assert rec["result"]["rows"] == sum(results[r]["untied"]["looked_up_ids"] for r in (0, 1))


def test_dense_mode_allreduces_the_variable_sized_tensor(run):
    _, results = run
    for rank in (0, 1):
        for variant in ("untied", "tied"):
            for rec in results[rank][variant]["on"]:
                assert rec["collective"] == "allreduce"
                assert rec["result"]["nbytes"] == rec["sent"]["nbytes"] == rec["sent"]["dense_nbytes"]
        emb = emb_record(results[rank]["untied"], "on")
        assert emb["result"]["nbytes"] == VOCAB * DIM * 4


def test_tied_embedding_gradient_is_already_dense(run):
    _, results = run
    for rank in (0, 1):
        assert all(r["collective"] == "allreduce" for r in results[rank]["tied"]["off"])


@pytest.mark.parametrize("variant", ["untied", "tied"])
def test_averages_equal_horovod_tape_and_numpy_mean(run, variant):
    _, results = run
    local = [results[r][variant]["local_dense"] for r in (0, 1)]
    for rank in (0, 1):
        res = results[rank][variant]
        for i in range(len(res["names"])):
            mean = (np.asarray(local[0][i]) + np.asarray(local[1][i])) / 2
            for key in ("off_avg", "on_avg", "tape_off", "tape_on"):
                np.testing.assert_allclose(res[key][i], mean, atol=1e-6, rtol=1e-5,
                                           err_msg=f"{variant} {key} {res['names'][i]}")


def test_timeline_allgather_sizes_match_the_gathered_tensors(run):
    out, results = run
    res = results[0]["untied"]
    sizes = bytes_by_kind(read_timeline(out / "timeline.json"))
    gathered = sum(r["result"]["nbytes"] for r in res["off"] if r["collective"] == "allgather")
    reduced = sum(r["result"]["nbytes"] for r in res["off"] if r["collective"] == "allreduce")
    assert sizes["ALLGATHER"] == gathered
    assert sizes["ALLREDUCE"] == reduced
