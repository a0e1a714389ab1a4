"""The graddrop warm-up benchmark (`python -m experiments graddrop-warmup`): argument checks, the
table, and one tiny run under a real ``horovodrun -np 2``."""
import json

import pytest

from tests.parallel import launch
from experiments import STUDIES
from experiments.graddrop_warmup import study as bench

TINY = ["--set", "model.num_layers=1", "--set", "model.d_model=32", "--set", "model.num_heads=2",
        "--set", "model.ff_dim=64"]


def test_registered_as_a_study():
    assert STUDIES["graddrop-warmup"] == "experiments.graddrop_warmup.study"


@pytest.mark.parametrize("bad", [["--kept", "0"], ["--kept", "1.5"], ["--kept", "half"],
                                 ["--kept", ""], ["--ranks", "1,2"], ["--rounds", "0"]])
def test_bad_arguments_are_refused(bad, capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(bad)
    assert "error" in capsys.readouterr().err
    assert bench.parse_args(["--kept", "1, 0.5"]).kept == [1.0, 0.5]


def test_speed_up_is_the_median_of_per_round_ratios():
    cell = {"rounds": {"allgather": [2.0, 1.0, 3.0], "fallback": [1.0, 1.0, 1.0]}}
    assert bench.speedup(cell) == 2.0  # ratios 2, 1, 3 (the ratio of medians would also be 2)
    cell = {"rounds": {"allgather": [4.0, 1.0, 1.0], "fallback": [1.0, 2.0, 1.0]}}
    assert bench.speedup(cell) == 1.0  # ratios 4, 0.5, 1; medians 1 / 1 = 1 too, but not 4/1


@pytest.mark.slow
@pytest.mark.parallel
@pytest.mark.skipif(not launch.horovod_importable(), reason="horovod.tensorflow is not importable")
def test_tiny_run_falls_back_only_where_the_pairs_cost_more(tmp_path):
    out = tmp_path / "gw.json"
    assert bench.main(["--ranks", "2", "--kept", "1,0.01", "--rounds", "1", "--steps", "1",
                       "--out", str(out), *TINY]) == 0
    result = json.loads(out.read_text())
    assert result["command"].startswith("python -m experiments graddrop-warmup")
    (run,) = result["runs"]
    everything, little = run["cells"]
    assert everything["stats"]["fallback"]["dense_fallback"]
    assert not everything["stats"]["allgather"]["dense_fallback"]
    assert not little["stats"]["fallback"]["dense_fallback"]
    dense = everything["stats"]["fallback"]["dense_bytes"]
    assert everything["stats"]["fallback"]["sent_bytes"] == dense < everything["stats"]["allgather"]["sent_bytes"]
    assert little["stats"]["fallback"]["sent_bytes"] < 0.05 * dense
    assert all(t > 0 for c in run["cells"] for t in c["seconds"].values())
    assert "| 2 | 1 | 0.00 | yes |" in bench.table(result)
