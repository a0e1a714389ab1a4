"""Reading Horovod timeline files: nesting, sizes, merged busy time, truncated files."""
import json

import pytest

from experiments.lib import timeline as tl

EVENTS = [
    {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "grad_a"}},
    {"name": "process_name", "ph": "M", "pid": 2, "args": {"name": "grad_b"}},
    {"ph": "E", "ts": 5, "pid": 1},  # the end of an op begun before recording started
    {"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": 10, "pid": 1},
    {"ph": "X", "name": "0", "ts": 11, "pid": 1, "dur": 0},
    {"ph": "E", "ts": 20, "pid": 1},
    {"ph": "B", "name": "ALLREDUCE", "ts": 20, "pid": 1},
    {"ph": "B", "name": "GLOO_ALLREDUCE", "ts": 21, "pid": 1},
    {"ph": "E", "ts": 40, "pid": 1},
    {"ph": "E", "ts": 45, "pid": 1, "args": {"dtype": "float32", "shape": "[1000, 8]"}},
    {"ph": "B", "name": "ALLGATHER", "ts": 30, "pid": 2},  # overlaps the allreduce (fusion)
    {"ph": "E", "ts": 60, "pid": 2, "args": {"dtype": "int64", "shape": "[7]"}},
    {"ph": "B", "name": "ALLGATHER", "ts": 100, "pid": 2},
    {"ph": "E", "ts": 110, "pid": 2, "args": {"dtype": "float32", "shape": "[7, 8]"}},
]


def test_parse_top_level_ops_with_sizes():
    ops = tl.parse_events(EVENTS)
    assert [(o.tensor, o.kind) for o in ops] == [
        ("grad_a", "NEGOTIATE_ALLREDUCE"), ("grad_a", "ALLREDUCE"), ("grad_b", "ALLGATHER"),
        ("grad_b", "ALLGATHER")]
    assert ops[0].nbytes is None
    assert ops[1].shape == (1000, 8) and ops[1].nbytes == 32000 and ops[1].duration_us == 25
    assert tl.bytes_by_kind(ops) == {"ALLREDUCE": 32000, "ALLGATHER": 7 * 8 + 7 * 8 * 4}


def test_busy_time_merges_overlapping_ops():
    ops = tl.parse_events(EVENTS)
    assert tl.busy_us(ops) == (60 - 20) + (110 - 100)
    assert tl.busy_us(ops, ["NEGOTIATE_ALLREDUCE"]) == 10
    assert tl.busy_us([]) == 0


def test_read_file_also_without_closing_bracket(tmp_path):
    whole = tmp_path / "t.json"
    whole.write_text(json.dumps(EVENTS))
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps(EVENTS)[:-1] + ",")  # a job killed while writing
    assert tl.read_timeline(whole) == tl.read_timeline(cut)


def test_bad_files_give_clear_errors(tmp_path):
    empty = tmp_path / "e.json"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty Horovod timeline"):
        tl.read_timeline(empty)
    bad = tmp_path / "b.json"
    bad.write_text('{"not": "a list"}')
    with pytest.raises(ValueError, match="not a Horovod timeline"):
        tl.read_timeline(bad)
