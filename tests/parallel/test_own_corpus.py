"""An own corpus under a real ``horovodrun -np 2`` (Gloo): each rank streams its own share of the
pairs, disjoint and together every pair once, from 5 shards (which 2 ranks do not divide), and
trains; a corpus of one shard is split between the ranks (see workers/own_corpus.py)."""
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
    data = write_own_corpus(out / "data", num_shards=5, repeats=2)
    spm = (data / "vocab" / "spm-320.model").read_bytes()
    write_own_corpus(out / "one-shard", num_shards=1, repeats=1, spm_proto=spm)
    return out, launch.horovodrun("own_corpus.py", out, controller="gloo", timeout=600)


def test_ranks_read_disjoint_equal_shares_that_cover_every_pair_once(launched):
    out, results = launched
    blocks = [results[r]["blocks"] for r in (0, 1)]
    assert len(results[0]["pairs"]) == len(results[1]["pairs"]) == 80  # 160 pairs in 5 shards
    split = [name for name, _, _ in blocks[0]]
    assert split[-1] == [name for name, _, _ in blocks[1]][0]  # the middle shard is split
    together = Counter(tuple(map(tuple, p)) for r in (0, 1) for p in results[r]["pairs"])
    assert together == Counter(shard_pairs(out / "data"))


def test_two_ranks_train_on_their_shares(launched):
    out, results = launched
    for rank in (0, 1):
        assert results[rank]["streamed"][0] == results[rank]["blocks"]  # its own share only
        assert results[rank]["final_step"] == STEPS
        assert results[rank]["one_shard_final_step"] == STEPS
    assert results[0]["losses"] and all(loss > 0 for loss in results[0]["losses"])
    assert any("reads its share of 80 once" in line and "en-fr" in line
               for line in results[0]["log"])
    meta = json.loads((out / "run" / "meta.json").read_text())
    assert meta["languages"] == ["en", "fr"] and meta["world_size"] == 2


def test_a_resumed_run_continues_each_ranks_stream_exactly(launched):
    _, results = launched
    assert [results[rank]["resumed_from"] for rank in (0, 1)] == [2, 2]
    # rank 0's losses of steps 2 and 4 (its batch under weights that both ranks' batches made)
    assert len(results[0]["losses"]) == 2
    assert results[0]["split_losses"] == results[0]["losses"]
    assert any("resuming from step 2 (rank 0's data from epoch" in line
               for line in results[0]["log"])
