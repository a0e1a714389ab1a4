"""The import graph of the ``tf_nmt`` package, read from the source with ``ast`` (nothing imported).

Every ``import``/``from ... import`` counts, at module level or inside a function, so a cycle
cannot be hidden behind a function-level import (and so does ``importlib.import_module`` of a
literal name). An edge goes to the module a statement names
(``from a.b import f`` -> ``a.b``; ``from a import b`` -> ``a.b`` when ``b`` is a module). The
implicit run of ``a/__init__`` before ``a.b`` is not an edge: a package's ``__init__`` importing
its own submodules, which import each other, is the normal layout and never a cycle.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterable, List, Set

PACKAGE = "tf_nmt"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE


def module_files(root: Path = ROOT) -> Dict[str, Path]:
    """Dotted module name -> source file, for every module of the package."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _resolve(name: str, modules: Set[str]) -> str:
    """The longest existing module prefix of ``name`` (``a.b.func`` -> ``a.b``)."""
    parts = name.split(".")
    while parts and ".".join(parts) not in modules:
        parts.pop()
    return ".".join(parts)


def imported_names(module: str, path: Path) -> Set[str]:
    """Every dotted name ``module`` imports, anywhere in it (relative imports made absolute;
    ``from a import b`` -> ``a.b``, which may name a function rather than a module)."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.update(f"{base}.{alias.name}" for alias in node.names)
        elif (isinstance(node, ast.Call) and _called_name(node.func) in DYNAMIC_IMPORTS
              and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str) and not node.args[0].value.startswith(".")):
            found.add(node.args[0].value)  # importlib.import_module("a.b"): an import too
    return found


DYNAMIC_IMPORTS = {"import_module", "importlib.import_module", "__import__"}


def _called_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return ""


def imports_of(module: str, path: Path, modules: Set[str]) -> Set[str]:
    """Modules of the package that importing ``module`` may execute directly."""
    targets: Set[str] = set()
    for name in imported_names(module, path):
        if name.split(".")[0] != PACKAGE:
            continue
        resolved = _resolve(name, modules)
        if resolved and resolved != module:
            targets.add(resolved)
    return targets


def outside_imports(tops: Iterable[str], root: Path = ROOT) -> Dict[str, Set[str]]:
    """Module -> the names it imports from the top-level packages ``tops`` (e.g. ``tests``),
    for the modules that import any."""
    tops = set(tops)
    found = {}
    for module, path in module_files(root).items():
        names = {n for n in imported_names(module, path) if n.split(".")[0] in tops}
        if names:
            found[module] = names
    return found


def import_graph(root: Path = ROOT) -> Dict[str, Set[str]]:
    files = module_files(root)
    modules = set(files)
    return {name: imports_of(name, path, modules) for name, path in files.items()}


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted.

    A package importing its own submodules (``a/__init__`` -> ``a.b``) is not a cycle by
    itself; it becomes one only when the submodule imports the package (or a sibling through it).
    """
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


if __name__ == "__main__":
    import sys
    sys.setrecursionlimit(10000)
    for c in cycles(import_graph()):
        print(" <-> ".join(c))
