"""The experiments area: one folder per study with its README and results, every results file
stamped with what made it, one entry point, and no results outside it."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import STUDIES

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = REPO / "experiments"
FOLDERS = sorted(p for p in EXPERIMENTS.iterdir()
                 if p.is_dir() and p.name not in ("lib", "__pycache__"))
RESULTS = sorted(EXPERIMENTS.glob("*/results/*.json"))


def test_results_live_with_their_experiment():
    assert not (REPO / "results").exists(), "results/ is gone: results go to experiments/<study>/results/"
    assert len(RESULTS) >= 40


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_each_experiment_has_a_readme_and_is_indexed(folder):
    assert (folder / "README.md").is_file()
    assert f"]({folder.name}/" in (EXPERIMENTS / "README.md").read_text()


def provenance_problems(record: dict) -> list:
    """What a results file's ``provenance`` lacks (empty: complete)."""
    stamp = record.get("provenance")
    if not isinstance(stamp, dict):
        return ["no provenance record"]
    missing = [k for k in ("command", "date", "machine") if k not in stamp]
    if not (stamp.get("git_revision") or stamp.get("committed_in")):
        missing.append("git_revision (or committed_in)")
    return missing


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_every_results_file_records_command_revision_date_and_machine(path):
    assert provenance_problems(json.loads(path.read_text())) == []


def test_the_provenance_check_catches_a_bare_file():
    assert provenance_problems({"bleu": 1}) == ["no provenance record"]
    assert provenance_problems({"provenance": {"command": "x", "date": "d"}}) == [
        "machine", "git_revision (or committed_in)"]


def test_the_entry_point_lists_every_study_and_each_module_exists():
    for name, module in STUDIES.items():
        assert importlib.util.find_spec(module) is not None, name
    out = subprocess.run([sys.executable, str(EXPERIMENTS / "__main__.py"), "--help"],
                         capture_output=True, text=True, cwd="/", check=True).stdout
    assert all(name in out for name in STUDIES)
