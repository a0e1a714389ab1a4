"""Efficiency arithmetic: speed-up against the 1-worker run, efficiency = speed-up / N."""
import pytest

from experiments.scaling.cluster.efficiency import (efficiency, efficiency_rows, markdown_table, speedup,
                                       strong_split)
from experiments.scaling.cluster.linkbench import bus_bandwidth_bits


def _run(n, tps, kind="weak", comm="dense", link="1gbit", step=1.0, compute=0.6):
    return {"link": link, "comm": comm, "kind": kind, "world": n, "tokens_per_s": tps,
            "step_s": step, "compute_s": compute, "comm_s": step - compute}


def test_speedup_and_efficiency():
    assert speedup(3000.0, 1000.0) == pytest.approx(3.0)
    assert efficiency(3000.0, 1000.0, 4) == pytest.approx(0.75)
    assert efficiency(1000.0, 1000.0, 1) == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [(0.0, 1.0, 2), (1.0, -1.0, 2), (1.0, 1.0, 0)])
def test_bad_inputs_raise(bad):
    with pytest.raises(ValueError):
        efficiency(*bad)


def test_weak_scaling_row_matches_hand_computation():
    # weak: 1 worker 1000 tok/s; 4 workers each with the same batch, 3640 tok/s in total -> 91%
    rows = efficiency_rows([_run(1, 1000.0), _run(4, 3640.0)])
    four = [r for r in rows if r.workers == 4][0]
    assert four.speedup == pytest.approx(3.64)
    assert four.efficiency == pytest.approx(0.91)
    assert four.comm_fraction == pytest.approx(0.4)


def test_strong_scaling_uses_step_time_ratio():
    # strong: the global batch (2400 tokens) is fixed; 1 worker 2.4 s/step, 4 workers 0.923 s/step
    one, four = 2400 / 2.4, 2400 / 0.923
    rows = efficiency_rows([_run(1, one, kind="strong", step=2.4), _run(4, four, kind="strong", step=0.923)])
    row = [r for r in rows if r.workers == 4][0]
    assert row.speedup == pytest.approx(2.4 / 0.923)
    assert row.efficiency == pytest.approx(2.4 / 0.923 / 4)


def test_baselines_are_per_link_comm_and_kind():
    runs = [_run(1, 1000.0, comm="dense"), _run(2, 1000.0, comm="dense"),
            _run(1, 500.0, comm="graddrop"), _run(2, 900.0, comm="graddrop"),
            _run(2, 100.0, comm="dense", link="100mbit")]  # no 1-worker baseline: left out
    rows = {(r.link, r.comm, r.workers): r for r in efficiency_rows(runs)}
    assert rows[("1gbit", "dense", 2)].efficiency == pytest.approx(0.5)
    assert rows[("1gbit", "graddrop", 2)].efficiency == pytest.approx(0.9)
    assert ("100mbit", "dense", 2) not in rows


def test_strong_split():
    assert strong_split(64, 4) == 16
    with pytest.raises(ValueError, match="not divisible"):
        strong_split(64, 3)


def test_markdown_table_lists_every_row():
    text = markdown_table(efficiency_rows([_run(1, 1000.0), _run(2, 1500.0)]))
    lines = text.splitlines()
    assert len(lines) == 4
    assert "| 2 | 1500 |" in lines[3] and "| 75% |" in lines[3]


def test_bus_bandwidth():
    # ring allreduce, 2 ranks: each sends S bytes; 12.5 MB in 1 s = 100 Mbit/s
    assert bus_bandwidth_bits(12_500_000, 2, 1.0) == pytest.approx(1e8)
    assert bus_bandwidth_bits(12_500_000, 4, 1.0) == pytest.approx(1.5e8)
