"""Results recorded on an uncommitted tree are named as such wherever the docs cite them.

A results file's provenance records ``git_dirty``: true means the code that produced it was
not a commit, so nobody can check out what was measured. Such a file must be listed in
:data:`DIRTY_ALLOWED` with the revision its records give, and every citation of it (a link to it
or a figure marker, in README.md, docs/ and experiments/) must carry, in the same table row or
paragraph, the note "recorded on an uncommitted tree at <rev>". A new dirty results file fails
here until it is re-run on a commit, or listed and noted.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Set, Tuple

REPO = Path(__file__).resolve().parents[2]

# results file (from the repository root) -> the short revision its dirty records give
DIRTY_ALLOWED: Dict[str, str] = {
    # made from a clean checkout of c9f0f20; the uncommitted change was the file itself, which
    # the study rewrote after each attempt (experiments.lib.common ignores results files since)
    "experiments/chaos/results/stress.json": "c9f0f20",
    "experiments/serving_speed/results/serving_engines.json": "2c9f698",
    "experiments/serving_speed/results/serving_engines_levers.json": "2c9f698",
    "experiments/train_speed/results/train_speed_ema.json": "5e5a7c9",
    # a clean checkout of c9f0f20 whose only change was the chaos study's results file
    "experiments/train_speed/results/train_speed_auto.json": "c9f0f20",
}


def note(revision: str) -> str:
    return f"recorded on an uncommitted tree at {revision}"


def dirty_revisions(data: Any) -> Iterator[str]:
    """The revisions of every record in ``data`` (at any depth) that says ``git_dirty: true``."""
    if isinstance(data, dict):
        if data.get("git_dirty") is True:
            yield str(data.get("git_revision", "?"))[:7]
        for value in data.values():
            yield from dirty_revisions(value)
    elif isinstance(data, list):
        for value in data:
            yield from dirty_revisions(value)


def dirty_results(repo: Path = REPO) -> Dict[str, Set[str]]:
    """Each results file under experiments/ with a dirty record -> its dirty revisions."""
    found = {}
    for path in sorted((repo / "experiments").glob("**/results/**/*.json")):
        try:
            data = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        revisions = set(dirty_revisions(data))
        if revisions:
            found[path.relative_to(repo).as_posix()] = revisions
    return found


def blocks(text: str) -> Iterator[Tuple[int, str]]:
    """(first line number, text) of each citation context of a Markdown file: a table row, or a
    paragraph (lines up to a blank line or a table); code blocks are skipped."""
    para: List[str] = []
    start, fenced = 0, False
    for number, line in enumerate(text.splitlines() + [""], 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if not line.strip() or line.startswith("|"):
            if para:
                yield start, "\n".join(para)
                para = []
            if line.startswith("|"):
                yield number, line
            continue
        if not para:
            start = number
        para.append(line)


def missing_notes(allowed: Dict[str, str], repo: Path = REPO) -> List[str]:
    """Where a doc cites an allow-listed file without its note: "file:line cites name"."""
    problems = []
    docs = [repo / "README.md", *sorted((repo / "docs").glob("**/*.md")),
            *sorted((repo / "experiments").glob("**/*.md"))]
    for doc in docs:
        text = doc.read_text()
        for rel, revision in allowed.items():
            name = re.escape(Path(rel).name)
            cited = re.compile(rf"\]\((?:[^)\s]*/)?{name}(?:#[^)]*)?\)|<!-- fig \S*/{name} ")
            for number, block in blocks(text):
                if cited.search(block) and note(revision) not in " ".join(block.split()):
                    problems.append(f"{doc.relative_to(repo)}:{number} cites {Path(rel).name} "
                                    f"without \"{note(revision)}\"")
    return problems


def test_every_dirty_results_file_is_allow_listed_with_its_revision():
    found = dirty_results()
    unlisted = {rel: sorted(revs) for rel, revs in found.items() if rel not in DIRTY_ALLOWED}
    assert not unlisted, ("results recorded on an uncommitted tree (git_dirty: true): re-run "
                          f"them on a commit, or list and note them: {unlisted}")
    for rel, revision in DIRTY_ALLOWED.items():
        assert rel in found, f"{rel} is no longer dirty: drop it from DIRTY_ALLOWED and its notes"
        assert found[rel] == {revision}, (rel, found[rel])


def test_every_citation_of_a_dirty_results_file_carries_the_note():
    problems = missing_notes(DIRTY_ALLOWED)
    assert not problems, "\n".join(problems)


def test_a_new_dirty_file_or_an_unnoted_citation_is_caught(tmp_path):
    results = tmp_path / "experiments" / "study" / "results"
    results.mkdir(parents=True)
    (results / "clean.json").write_text(json.dumps({"provenance": {"git_dirty": False}}))
    (results / "new.json").write_text(json.dumps(
        {"runs": {"a": {"provenance": {"git_dirty": True, "git_revision": "abcdef123"}}}}))
    assert dirty_results(tmp_path) == {"experiments/study/results/new.json": {"abcdef1"}}
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "| row | 2.5x <!-- fig experiments/study/results/new.json runs.a.x --> |\n"
        "| noted | 2.5x <!-- fig experiments/study/results/new.json runs.a.x -->, "
        f"{note('abcdef1')} |\n\nA paragraph citing [new.json](experiments/study/results/new.json)\n"
        f"over two lines, {note('abcdef1')}.\n\n```\npython -m x --out results/new.json\n```\n")
    (tmp_path / "experiments" / "study" / "README.md").write_text(
        "The figure ([new.json](results/new.json)) is\nnot noted.\n")
    problems = missing_notes({"experiments/study/results/new.json": "abcdef1"}, tmp_path)
    assert problems == [
        'README.md:1 cites new.json without "recorded on an uncommitted tree at abcdef1"',
        'experiments/study/README.md:1 cites new.json without "recorded on an uncommitted tree '
        'at abcdef1"']
