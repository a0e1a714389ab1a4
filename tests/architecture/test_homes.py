"""One home per decision (issue 54), checked on the source: the package stands on few floors,
the CLI only parses and calls the commands, and translating with an export happens only in
tf_nmt.inference. Each check also runs on a planted defect, so it cannot pass by seeing nothing."""
from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Dict, List, Set

from tests.architecture.import_graph import ROOT, import_graph
from tests.architecture.layers import part_of
from tests.architecture.test_layers import plant

#: The most floors tf_nmt may stand on: rooms in the longest chain of imports between its parts.
MAX_FLOORS = 8
#: What the CLI may import: the verbs, and what it needs to declare its flags.
CLI_MAY_IMPORT = {"commands", "config", "errors", "utils", "inference", "data", "quantization"}
#: Calls that translate with an export; only tf_nmt.inference makes them.
EXPORT_READERS = {"saved_model.load", "ctranslate2.Translator", "translate_batch"}


def longest_chain(graph: Dict[str, Set[str]]) -> List[str]:
    """The longest chain of part-to-part imports (the package __init__ not counted)."""
    edges: Dict[str, Set[str]] = {}
    for module, targets in graph.items():
        for target in targets:
            a, b = part_of(module), part_of(target)
            if a != b and "tf_nmt" not in (a, b):
                edges.setdefault(a, set()).add(b)

    @functools.lru_cache(maxsize=None)
    def chain(part: str) -> tuple:
        return max(((part,) + chain(b) for b in edges.get(part, ())), key=len, default=(part,))

    return list(max((chain(p) for p in {part_of(m) for m in graph} - {"tf_nmt"}), key=len))


def cli_imports(graph: Dict[str, Set[str]]) -> Set[str]:
    return {part_of(t) for t in graph.get("tf_nmt.cli", set())} - {"cli"}


def export_readers(root: Path = ROOT) -> Dict[str, Set[str]]:
    """Module -> the export-reading calls it makes, for modules outside tf_nmt/inference."""
    found: Dict[str, Set[str]] = {}
    for path in root.rglob("*.py"):
        if "inference" in path.relative_to(root).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func)
                hits = {r for r in EXPORT_READERS if name == r or name.endswith("." + r)}
                if hits:
                    found.setdefault(str(path.relative_to(root)), set()).update(hits)
    return found


def test_the_package_stands_on_at_most_eight_floors():
    chain = longest_chain(import_graph())
    assert len(chain) <= MAX_FLOORS, " -> ".join(chain)


def test_the_cli_only_reaches_the_commands():
    assert cli_imports(import_graph()) <= CLI_MAY_IMPORT


def test_only_inference_reads_exports():
    assert export_readers() == {}


def test_the_checks_find_planted_defects(tmp_path):
    files = {f"p{i}/m.py": f"from tf_nmt.p{i + 1} import m\n" for i in range(MAX_FLOORS)}
    files.update({f"p{MAX_FLOORS}/m.py": "",
                  "cli.py": "from tf_nmt.p0 import m\nfrom tf_nmt.commands import x\n",
                  "commands/x.py": "",
                  "export/y.py": "import tensorflow as tf\ntf.saved_model.load('d')\n"})
    pkg = plant(tmp_path, files)
    graph = import_graph(pkg)
    assert len(longest_chain(graph)) == MAX_FLOORS + 2  # cli -> p0 -> ... -> p8
    assert cli_imports(graph) - CLI_MAY_IMPORT == {"p0"}
    assert export_readers(pkg) == {"export/y.py": {"saved_model.load"}}
