"""Architecture checks: no import cycles in ``tf_nmt``, and every module imports on its own.

The cycle check reads the source (see :mod:`tests.architecture.import_graph`). The import checks
run real interpreters: one child per module, forked from a parent that has loaded only the
third-party stack (TensorFlow, Keras 2 and 3, tensorflow-text...), so each child starts with no
``tf_nmt`` module loaded and imports exactly one; and whole-package imports in shuffled orders.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.architecture.import_graph import ROOT, cycles, import_graph, module_files

MODULES = sorted(m for m in module_files() if not m.endswith("__main__"))
REPO = ROOT.parent


def test_the_graph_sees_the_package():
    graph = import_graph()
    assert len(graph) == len(MODULES) + 1  # + __main__
    assert "tf_nmt.compat" in graph["tf_nmt.training.trainer"]


def test_cycle_check_finds_a_planted_cycle(tmp_path):
    pkg = tmp_path / "tf_nmt"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from tf_nmt.sub.a import f\n")
    (pkg / "sub" / "a.py").write_text("def f():\n    from tf_nmt.sub import b\n")
    (pkg / "sub" / "b.py").write_text("from . import a\n")
    assert cycles(import_graph(pkg)) == [["tf_nmt.sub.a", "tf_nmt.sub.b"]]


def test_no_import_cycles():
    assert cycles(import_graph()) == []


_CHILD = textwrap.dedent("""
    import os, sys, importlib
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy, yaml, tensorflow, tf_keras, tensorflow_text, sentencepiece, sacrebleu  # noqa
    failed = []
    for name in sys.argv[1:]:
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                assert not [m for m in sys.modules if m.split(".")[0] == "tf_nmt"]
                importlib.import_module(name)
            except BaseException as err:  # report and exit non-zero
                print(f"{name}: {type(err).__name__}: {err}", flush=True)
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            failed.append(name)
    print("FAILED " + " ".join(failed) if failed else "OK", flush=True)
    sys.exit(1 if failed else 0)
""")


@pytest.mark.slow
def test_every_module_imports_on_its_own():
    proc = subprocess.run([sys.executable, "-c", _CHILD, *MODULES], cwd=REPO, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), proc.stdout + proc.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_all_modules_import_in_any_order(seed):
    code = ("import importlib, random, sys; names = sys.argv[2:]; "
            "random.Random(int(sys.argv[1])).shuffle(names); "
            "[importlib.import_module(n) for n in names]; print('OK')")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([sys.executable, "-c", code, str(seed), *MODULES], cwd=REPO,
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == "OK", proc.stderr[-3000:]
