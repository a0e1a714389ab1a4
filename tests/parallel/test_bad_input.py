"""Real ``horovodrun -np 2`` (Gloo): the trainer refuses bad distributed input with a clear
message on every rank, before anything is written and without hanging."""
import pytest

from tests.parallel import launch

pytestmark = [pytest.mark.parallel, pytest.mark.slow]

if not launch.horovod_importable():
    pytest.skip("horovod.tensorflow is not importable: build it with scripts/install_horovod.sh",
                allow_module_level=True)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return launch.horovodrun("bad_input.py", tmp_path_factory.mktemp("bad"), controller="gloo",
                             np=2, timeout=400)


def test_checkpoint_from_another_world_size_is_refused(results):
    for rank in (0, 1):
        res = results[rank]["world_size"]
        assert res["error"] == "RunDirError", res
        assert "written by 1 worker(s) but this run has 2" in res["message"]
        assert "--allow-world-size-change" in res["message"]
        assert res["meta_unchanged"] and res["files_after"] == ["meta.json"]


def test_more_ranks_than_training_pairs_is_refused(results):
    for rank in (0, 1):
        res = results[rank]["shards"]
        assert res["error"] == "ValueError", res
        assert "cannot split 1 training pairs over 2 workers" in res["message"]
        assert "use at most 1 workers or more data" in res["message"]
        assert not res["has_checkpoint"]
