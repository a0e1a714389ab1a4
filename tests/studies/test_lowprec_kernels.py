"""The Table 7.5 kernel study (`python -m experiments lowprec-kernels`): its tf.matmul reference
column runs on the TensorFlow thread count asked for, also where TensorFlow has already started
in the calling process (as after the lowprec study's training), and records the count it ran
with; a count TensorFlow would silently ignore is never reported as applied."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import STUDIES
from experiments.lowprec import kernels
from tf_nmt.compat import tf

ROOT = Path(__file__).resolve().parents[2]
TINY_SHAPES = (("tiny", 8, 16),)


def test_registered_as_a_study():
    assert STUDIES["lowprec-kernels"] == "experiments.lowprec.kernels"


def test_tf_column_gets_its_threads_after_tensorflow_started():
    (tf.constant(1.0) + 1.0).numpy()  # TensorFlow's pools are fixed from here on, in this process
    here = kernels.current_tf_threads()["intra_op_threads"]
    want = 1 if here != 1 else 2  # a count this process cannot switch to any more
    assert not kernels.set_tf_threads(want)
    column = kernels.tf_matmul_column(want, TINY_SHAPES, tokens=4, target_s=1e-4, rounds=2,
                                      bursts=1)
    # the counts are read back from the process that measured, not copied from the request
    assert (column["intra_op_threads"], column["inter_op_threads"]) == (want, want)
    assert column["measured_in"].startswith("a subprocess")
    assert len(column["ns"]["tiny"]) == 2 and all(ns > 0 for ns in column["ns"]["tiny"])
    assert kernels.current_tf_threads()["intra_op_threads"] == here  # this process untouched


def test_bad_thread_counts_are_refused(capsys):
    with pytest.raises(ValueError, match="threads must be >= 1"):
        kernels.tf_matmul_column(0, TINY_SHAPES, tokens=4, target_s=1e-4, rounds=1, bursts=1)
    with pytest.raises(SystemExit):
        kernels.main(["--tf-threads", "0", "--out", "/nonexistent/never-written.json"])
    assert "--tf-threads must be >= 1" in capsys.readouterr().err


@pytest.mark.slow
def test_standalone_run_times_tf_matmul_on_one_thread_in_process(tmp_path):
    out = tmp_path / "lp.json"
    proc = subprocess.run([sys.executable, "-m", "experiments", "lowprec-kernels", "--quick",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["tf_matmul"] == {"intra_op_threads": 1, "inter_op_threads": 1,
                                "measured_in": "this process"}
    assert res["cpp_kernel_threads"] == 1
    assert all(row["gflops_median"]["tf_matmul_fp32"] > 0 for row in res["matmul"])
    assert res["command"].startswith("python -m experiments lowprec-kernels --quick")
    assert "tf.matmul on 1" in proc.stdout
