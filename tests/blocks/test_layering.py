"""Blocks are plain torch: lit_models/blocks imports nothing from datamodules or the Lightning layer.

(The package-level one-way rule is tests/cli/test_conventions.py.) A static scan of every import statement,
module level and inside functions, so a lazy import cannot hide one.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = {"attnlab_core", "lit_models", "datamodules", "ablations", "benchmarks"}


def _imports(path: Path) -> set[str]:
    """Dotted names of every project module imported by one file."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return {n for n in names if n.split(".")[0] in PROJECT}


def _files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def test_blocks_are_plain_torch():
    """lit_models/blocks imports only the bottom layer, the axes and other blocks."""
    allowed = ("attnlab_core", "lit_models.axes", "lit_models.blocks")
    bad = {f"{p.relative_to(ROOT)}: {n}" for p in _files("lit_models/blocks") for n in _imports(p)
           if not n.startswith(allowed)}
    assert not bad, sorted(bad)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Project module -> project modules it imports (any import statement, TYPE_CHECKING ones included)."""
    files = [p for package in sorted(PROJECT | {"attnlab"}) for p in _files(package)]
    modules = {_module_name(p): p for p in files}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported in _imports(path):
            while imported and imported not in modules:  # `from pkg.mod import name` names a module or a symbol
                imported = imported.rpartition(".")[0]
            if imported and imported != name and not name.startswith(imported + "."):
                targets.add(imported)
        graph[name] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_finds_a_planted_cycle():
    """The check below can fail: a two-module loop and a three-module loop are both reported."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert sorted(_cycles(graph)) == [["a", "b"], ["c", "d", "e"]]


def test_no_import_cycle_between_any_two_modules():
    """Module-level one-way imports across every package, benchmarks included (package __init__
    re-exports of their own submodules excepted)."""
    assert _cycles(_import_graph()) == []
