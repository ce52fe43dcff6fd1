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
