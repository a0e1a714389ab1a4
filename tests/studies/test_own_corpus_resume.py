"""The ``own-corpus-resume`` study runs end to end on a tiny corpus (a check of its code, not a
measurement): it writes its table's rows with the positions it resumed at, and provenance."""
import json

from experiments import STUDIES
from experiments.own_corpus import resume
from tests.data.own_corpus_fixture import write_own_corpus


def test_resume_study_writes_positions_and_provenance(tmp_path):
    assert STUDIES["own-corpus-resume"] == "experiments.own_corpus.resume"
    data = write_own_corpus(tmp_path / "data", num_shards=3)
    out = tmp_path / "resume.json"
    assert resume.main(["--data-dir", str(data), "--steps", "3", "300", "--repeats", "1",
                        "--replay-max", "3", "--batch-tokens", "256", "--set",
                        "data.shuffle_buffer=32", "--ranks", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    first, last = result["rows"]
    assert first["position"][0] == 0 and last["position"][0] > 1  # far into later epochs
    assert "replay_median" in first and "replay_median" not in last
    assert result["rank_pairs"] == 120 and result["ranks"] == 2
    assert {"command", "git_revision", "date", "machine"} <= set(result["provenance"])
