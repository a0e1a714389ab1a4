"""An own corpus under a real ``horovodrun -np 2`` (Gloo): each rank streams its own shards,
disjoint and together every pair once, and trains; more ranks than shards is one line on every
rank before anything is written (see workers/own_corpus.py)."""
import json
from collections import Counter

import pytest

from tests.data.own_corpus_fixture import shard_pairs, write_own_corpus
from tests.parallel import launch
from tests.parallel.workers.own_corpus import STEPS

pytestmark = [pytest.mark.parallel, pytest.mark.slow,
              pytest.mark.skipif(not launch.horovod_importable(), reason="horovod.tensorflow is "
                                 "not importable: build it with scripts/install_horovod.sh")]


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    out = tmp_path_factory.mktemp("own-corpus")
    data = write_own_corpus(out / "data", num_shards=4, repeats=2)
    spm = (data / "vocab" / "spm-320.model").read_bytes()
    write_own_corpus(out / "one-shard", num_shards=1, repeats=1, spm_proto=spm)
    return out, launch.horovodrun("own_corpus.py", out, controller="gloo", timeout=600)


def test_ranks_read_disjoint_shards_that_cover_every_pair_once(launched):
    out, results = launched
    files = [results[r]["files"] for r in (0, 1)]
    assert not set(files[0]) & set(files[1])
    assert sorted(files[0] + files[1]) == sorted(p.name for p in (out / "data" / "shards").iterdir())
    together = Counter(tuple(map(tuple, p)) for r in (0, 1) for p in results[r]["pairs"])
    assert together == Counter(shard_pairs(out / "data"))


def test_two_ranks_train_on_their_shards(launched):
    out, results = launched
    for rank in (0, 1):
        assert results[rank]["streamed"] == [results[rank]["files"]]  # its own shards only
        assert results[rank]["final_step"] == STEPS
    assert results[0]["losses"] and all(loss > 0 for loss in results[0]["losses"])
    assert any("2 shard(s) per rank" in line and "en-fr" in line for line in results[0]["log"])
    meta = json.loads((out / "run" / "meta.json").read_text())
    assert meta["languages"] == ["en", "fr"] and meta["world_size"] == 2


def test_more_ranks_than_shards_is_one_line_on_every_rank(launched):
    out, results = launched
    for rank in (0, 1):
        refusal = results[rank]["refusal"]
        assert refusal and "2 ranks but only 1 shards" in refusal and "\n" not in refusal
    assert not (out / "refused-run").exists()
