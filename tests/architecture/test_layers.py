"""Architecture checks: imports between the package's parts follow the declared layer order
(:data:`tests.architecture.layers.LAYERS`), and the package never imports ``experiments`` or
``tests``. Read from the source; each check also runs on a planted defect, so it cannot pass by
seeing nothing."""
from __future__ import annotations

from pathlib import Path
from typing import Dict

from tests.architecture.import_graph import import_graph, outside_imports
from tests.architecture.layers import LAYERS, part_of, undeclared, upward_imports

OUTSIDE = ("experiments", "tests")  # code that uses tf_nmt; tf_nmt never uses it


def plant(root: Path, files: Dict[str, str]) -> Path:
    """A throw-away ``tf_nmt`` package under ``root`` with ``files`` (path -> source)."""
    pkg = root / "tf_nmt"
    for name, source in {"__init__.py": "", **files}.items():
        path = pkg / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.parent != pkg and not (path.parent / "__init__.py").exists():
            (path.parent / "__init__.py").write_text("")
        path.write_text(source)
    return pkg


def test_every_part_has_a_layer_and_every_layer_a_part():
    graph = import_graph()
    assert undeclared(graph) == []
    assert sorted({part_of(m) for m in graph}) == sorted(LAYERS)
    assert len(set(LAYERS)) == len(LAYERS)


def test_no_module_imports_a_higher_layer():
    assert upward_imports(import_graph()) == []


def test_the_package_never_imports_experiments_or_tests():
    assert outside_imports(OUTSIDE) == {}


def test_layer_check_finds_planted_upward_imports(tmp_path):
    pkg = plant(tmp_path, {
        "config.py": "",
        "models/layer.py": ("from tf_nmt import config\n"        # down: allowed
                            "def f():\n"
                            "    from tf_nmt.training.trainer import train\n"),  # up, in a function
        "ops/kernel.py": "from ..data.pipeline import make_dataset\n",           # up, relative
        "data/pipeline.py": "from tf_nmt.ops import kernel\n",                     # down: allowed
        "training/trainer.py": "from tf_nmt.models.layer import f\nfrom . import other\n",
        "training/other.py": "",                                                  # same part
    })
    assert upward_imports(import_graph(pkg)) == [
        ("tf_nmt.models.layer", "tf_nmt.training.trainer"),
        ("tf_nmt.ops.kernel", "tf_nmt.data.pipeline")]


def test_layer_check_finds_a_planted_undeclared_part(tmp_path):
    pkg = plant(tmp_path, {"config.py": "", "newpart/thing.py": "from tf_nmt import config\n"})
    assert undeclared(import_graph(pkg)) == ["tf_nmt.newpart", "tf_nmt.newpart.thing"]


def test_outside_check_finds_planted_imports(tmp_path):
    pkg = plant(tmp_path, {
        "models/a.py": "def f():\n    from experiments.lib import common\n",
        "utils/b.py": "import tests.helpers as h\n",
        "cli.py": "import importlib\nimportlib.import_module('experiments.lowprec.study')\n",
        "data/c.py": "import experimental_thing\nfrom testsuite import x\n",  # look-alikes: fine
    })
    assert outside_imports(OUTSIDE, pkg) == {
        "tf_nmt.models.a": {"experiments.lib.common"},
        "tf_nmt.utils.b": {"tests.helpers"},
        "tf_nmt.cli": {"experiments.lowprec.study"}}
