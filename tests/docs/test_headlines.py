"""Every headline figure in README.md equals its results file.

A figure is written as ``**9.68** <!-- fig experiments/quickstart/results/quickstart.json bleu -->``:
the number just before the marker must equal the value at the key path (dots; list indices as
integers; an optional trailing ``*100``/``/1000`` scales it), rounded to the decimals written.
Every row of the "Headline results" table must carry at least one such marker.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, List, Tuple


REPO = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"(-?[\d,]*\.?\d+)\s*(x|×|%|)\**\s*<!-- fig (\S+) (\S+?)(?: ([*/])(\d+(?:\.\d+)?))? -->")


def lookup(data: Any, key_path: str) -> Any:
    for part in key_path.split("."):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


def check_figures(text: str, repo: Path = REPO) -> Tuple[int, List[str]]:
    """(figures checked, mismatches) of the markers in ``text``."""
    problems, seen = [], 0
    for line_no, line in enumerate(text.splitlines(), 1):
        for m in MARKER.finditer(line):
            seen += 1
            written, _, rel, key, op, factor = m.groups()
            path = repo / rel
            if not path.is_file():
                problems.append(f"line {line_no}: {rel} does not exist")
                continue
            try:
                value = float(lookup(json.loads(path.read_text()), key))
            except (KeyError, IndexError, TypeError, ValueError) as err:
                problems.append(f"line {line_no}: {rel} has no number at {key} ({err!r})")
                continue
            if op:
                value = value * float(factor) if op == "*" else value / float(factor)
            digits = written.replace(",", "")
            decimals = len(digits.split(".")[1]) if "." in digits else 0
            if round(value, decimals) != float(digits):
                problems.append(f"line {line_no}: README says {written}, {rel} {key} is "
                                f"{value:.{decimals + 2}f}")
    return seen, problems


def headline_rows(text: str) -> List[str]:
    """The data rows of the table under "## Headline results"."""
    section = text.split("## Headline results", 1)[1].split("\n## ", 1)[0]
    rows = [l for l in section.splitlines() if l.startswith("|")]
    return [r for r in rows[2:]]  # after the header and its separator


def test_every_headline_figure_equals_its_results_file():
    text = (REPO / "README.md").read_text()
    seen, problems = check_figures(text)
    assert not problems, "\n".join(problems)
    rows = headline_rows(text)
    assert 3 <= len(rows) <= 12, "the headline table should have a handful of rows"
    unmarked = [r for r in rows if "<!-- fig " not in r]
    assert not unmarked, "headline rows without a checked figure:\n" + "\n".join(unmarked)
    assert seen >= len(rows)


def test_a_wrong_or_dangling_figure_is_caught(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"a": {"b": [0.5, 9.684]}}))
    good = "| q | **9.68** <!-- fig r.json a.b.1 --> | 50% <!-- fig r.json a.b.0 *100 --> |"
    assert check_figures(good, tmp_path) == (2, [])
    bad = "| q | **9.69** <!-- fig r.json a.b.1 --> | 9.7x <!-- fig r.json a.c --> |"
    seen, problems = check_figures(bad + "\n3 <!-- fig missing.json a -->", tmp_path)
    assert seen == 3 and len(problems) == 3
    assert "README says 9.69" in problems[0] and "no number at a.c" in problems[1]
    assert "missing.json does not exist" in problems[2]


def test_the_planning_figures_equal_their_results_file():
    seen, problems = check_figures((REPO / "experiments" / "planning" / "README.md").read_text())
    assert not problems, "\n".join(problems)
    assert seen >= 13  # every predicted figure of the seeds' table


def test_the_experiments_index_figures_equal_their_results_files():
    seen, problems = check_figures((REPO / "experiments" / "README.md").read_text())
    assert not problems, "\n".join(problems)
    assert seen >= 6  # the en-ru row's, at least


def test_a_bleu_headline_gives_its_copy_baseline_and_where_its_start_was_measured():
    """A BLEU on in-domain text means little without what copying the source scores there, and
    a "from X" baseline must say at which step it was taken (the en-ru run's first score is at
    step 250, not step 0)."""
    en_ru = "experiments/second_pair/results/en-ru.json"
    for path, rel in (("README.md", en_ru), ("experiments/README.md", en_ru)):
        rows = [r for r in (REPO / path).read_text().splitlines()
                if r.startswith("|") and f"{rel} end.bleu" in r]
        assert len(rows) == 1, (path, rows)
        for key in ("end.copy_baseline_bleu", "start.bleu", "start.step", "end.step"):
            assert f"<!-- fig {rel} {key} -->" in rows[0], (path, key)
        assert "in-domain" in rows[0] and "copying the source" in rows[0], path


def test_every_marked_figure_in_the_docs_and_experiments_equals_its_results_file():
    """README, docs/ and experiment READMEs alike: wherever a figure carries a marker."""
    pages = sorted(list((REPO / "docs").rglob("*.md")) + list((REPO / "experiments").rglob("*.md")))
    marked = 0
    for page in pages:
        seen, problems = check_figures(page.read_text())
        assert not problems, f"{page.relative_to(REPO)}:\n" + "\n".join(problems)
        marked += seen
    assert marked >= 3 + 6 + 13  # docs/training.md's precision figures, the index, planning
