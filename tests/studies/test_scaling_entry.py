"""The scaling study and the emulated-cluster tool run through the experiments entry point."""
import subprocess
import sys
from pathlib import Path

from experiments import STUDIES
from experiments import run_study

REPO = Path(__file__).resolve().parents[2]


def test_scaling_is_a_study_and_dry_run_prints_one_command_per_cell(capsys):
    assert STUDIES["scaling"] == "experiments.scaling.study"
    assert run_study("scaling", ["--launcher", "local", "--workers", "1,2", "--comm",
                                 "sparse_as_dense,graddrop", "--dry-run"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 * 2 * 2  # comm modes x weak/strong x worker counts
    assert sum("horovodrun -np 2" in line for line in lines) == 4
    assert all("-m experiments.scaling.cluster.worker" in line for line in lines)


def test_both_run_from_the_entry_point_outside_the_checkout():
    for name in ("scaling", "cluster"):  # cwd elsewhere: the entry point finds its checkout
        proc = subprocess.run([sys.executable, str(REPO / "experiments" / "__main__.py"), name,
                               "--help"], capture_output=True, text=True, timeout=120, cwd="/")
        assert proc.returncode == 0 and "usage:" in proc.stdout, proc.stderr
