"""The tcmalloc choice of tf-nmt processes (TF_NMT_ALLOCATOR) and the re-exec that applies it."""
import subprocess
import sys

import pytest

from tf_nmt.utils import allocator

LIB = "/opt/libtcmalloc_fake.so"


@pytest.fixture
def installed(monkeypatch):
    monkeypatch.setattr(allocator, "tcmalloc_path", lambda: LIB)


def test_tcmalloc_is_preloaded_before_other_preloads_when_asked_for(installed):
    env = allocator.with_tcmalloc({"LD_PRELOAD": "/x/libother.so", "A": "1",
                                   "TF_NMT_ALLOCATOR": "tcmalloc"})
    assert env["LD_PRELOAD"] == f"{LIB}:/x/libother.so" and env["A"] == "1"
    assert int(env["TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD"]) >= 1 << 30


def test_nothing_changes_by_default_when_system_or_already_preloaded(installed):
    assert allocator.with_tcmalloc({}) is None
    assert allocator.with_tcmalloc({"TF_NMT_ALLOCATOR": "system"}) is None
    assert allocator.with_tcmalloc({"LD_PRELOAD": "/usr/lib/libtcmalloc.so.4",
                                    "TF_NMT_ALLOCATOR": "tcmalloc"}) is None


def test_missing_library_is_an_error_when_asked_for(monkeypatch):
    monkeypatch.setattr(allocator, "tcmalloc_path", lambda: None)
    with pytest.raises(FileNotFoundError, match="libtcmalloc-minimal4"):
        allocator.with_tcmalloc({"TF_NMT_ALLOCATOR": "tcmalloc"})


def test_bad_choice_is_refused():
    with pytest.raises(ValueError, match="TF_NMT_ALLOCATOR='jemalloc'"):
        allocator.with_tcmalloc({"TF_NMT_ALLOCATOR": "jemalloc"})


@pytest.mark.skipif(allocator.tcmalloc_path() is None, reason="tcmalloc is not installed here")
@pytest.mark.parametrize("choice, mapped", [("tcmalloc", True), ("system", False)])
def test_reexec_maps_tcmalloc_into_the_same_process(tmp_path, choice, mapped):
    script = tmp_path / "probe.py"
    script.write_text(
        "import os, sys\n"
        "print('pid', os.getpid(), flush=True)\n"
        "from tf_nmt.utils import allocator\n"
        "allocator.reexec_with_tcmalloc(sys.orig_argv)\n"
        "print('tcmalloc', any('tcmalloc' in line for line in open('/proc/self/maps')))\n")
    env = {k: v for k, v in __import__("os").environ.items() if k != "LD_PRELOAD"}
    env["TF_NMT_ALLOCATOR"] = choice
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                         check=True).stdout.split("\n")
    pids = {line.split()[1] for line in out if line.startswith("pid")}
    assert len(pids) == 1  # exec keeps the process: horovodrun/mpirun see the same workers
    assert f"tcmalloc {mapped}" in out
