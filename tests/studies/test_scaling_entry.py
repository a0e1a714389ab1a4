"""The scaling study and the emulated-cluster tool run from the package (thin scripts)."""
import subprocess
import sys
from pathlib import Path

from tf_nmt.studies import STUDIES, run_study

REPO = Path(__file__).resolve().parents[2]


def test_scaling_is_a_study_and_dry_run_prints_one_command_per_cell(capsys):
    assert STUDIES["scaling"] == "tf_nmt.studies.scaling"
    assert run_study("scaling", ["--launcher", "local", "--workers", "1,2", "--comm",
                                 "sparse_as_dense,graddrop", "--dry-run"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 * 2 * 2  # comm modes x weak/strong x worker counts
    assert sum("horovodrun -np 2" in line for line in lines) == 4
    assert all("-m tf_nmt.scaling.worker" in line for line in lines)


def test_scripts_are_thin_entry_points():
    for script in ("scaling_study.py", "emulated_cluster.py"):
        proc = subprocess.run([sys.executable, str(REPO / "scripts" / script), "--help"],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and "usage:" in proc.stdout
        assert len((REPO / "scripts" / script).read_text().splitlines()) < 20
