"""Layering, checked over every package (benchmarks included): blocks are plain torch, packages import
only the layers below them, and no two modules import each other in a cycle.

A static scan of every import statement, module level and inside functions, so a lazy import cannot hide one.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = {"attnlab_core", "lit_models", "datamodules", "attnlab_run", "ablations", "benchmarks", "attnlab"}

BELOW: dict[str, set[str]] = {
    "attnlab_core": set(),
    "lit_models": {"attnlab_core"},
    "datamodules": {"attnlab_core"},
    "attnlab_run": {"attnlab_core", "lit_models", "datamodules"},
    "ablations": {"attnlab_core", "lit_models", "datamodules", "attnlab_run"},
    "benchmarks": {"attnlab_core", "lit_models", "datamodules", "attnlab_run", "ablations"},
    "attnlab": {"attnlab_core", "lit_models", "datamodules", "attnlab_run", "ablations"},
}
"""Each package and the packages it may import: attnlab_core <- lit_models, datamodules (never each other)
<- attnlab_run (the command machinery) <- ablations <- attnlab (the command table), benchmarks."""


def _imports(path: Path) -> set[str]:
    """Dotted names of every project module imported by one file."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)  # `from pkg import mod` imports the module pkg.mod: the graph resolves it
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return {n for n in names if n.split(".")[0] in PROJECT}


def _files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def test_blocks_are_plain_torch():
    """lit_models/blocks imports only the bottom layer and other blocks (never the axes: blocks take resolved
    objects and numbers)."""
    allowed = ("attnlab_core", "lit_models.blocks")
    bad = {f"{p.relative_to(ROOT)}: {n}" for p in _files("lit_models/blocks") for n in _imports(p)
           if not n.startswith(allowed)}
    assert not bad, sorted(bad)


def _package_imports(package: str) -> set[str]:
    """``file: imported package`` for every import of another project package in ``package``."""
    return {f"{p.relative_to(ROOT)}: {n.split('.')[0]}" for p in _files(package) for n in _imports(p)
            if n.split(".")[0] != package}


def test_every_package_is_in_the_layering():
    """A new top-level package with Python files must be placed in BELOW (and so be checked)."""
    found = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "sweeps"}
    assert found == set(BELOW) == PROJECT, found ^ set(BELOW)


def test_packages_import_only_the_layers_below():
    """attnlab_core <- lit_models, datamodules <- attnlab_run <- ablations <- attnlab, benchmarks; never upwards."""
    bad = sorted(row for package, allowed in BELOW.items() for row in _package_imports(package)
                 if row.rpartition(": ")[2] not in allowed)
    assert not bad, bad


def test_the_runtime_sits_above_the_models():
    """attnlab_run imports the models (it runs them); lit_models never imports attnlab_run."""
    runtime = {row.rpartition(": ")[2] for row in _package_imports("attnlab_run")}
    assert "lit_models" in runtime
    assert not [row for row in _package_imports("lit_models") if row.endswith(": attnlab_run")]


@pytest.mark.parametrize("module", ["attnlab_run.rundir", "attnlab_run.launch", "attnlab_run.evaluations"])
def test_the_run_directory_reads_without_lightning(module):
    """ablations reads a run through attnlab_run.rundir (its launcher's rank through launch, its evaluations'
    records through evaluations), which load neither Lightning nor torch."""
    code = (f"import sys, {module}; "
            "print(sorted(m for m in ('lightning', 'torch', 'jsonargparse') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Project module -> project modules it imports (any import statement, TYPE_CHECKING ones included)."""
    files = [p for package in sorted(PROJECT) for p in _files(package)]
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


def _datamodule_modules(trees: dict[str, ast.Module]) -> set[str]:
    """The modules defining a DataModule: a class deriving, through any chain of classes, from
    ``SplitDataModule`` (``datamodules.batching``, which defines the base classes, excepted)."""
    classes = {(name, node.name): {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
               for name, tree in trees.items() for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    found = {"SplitDataModule"}
    while grown := {cls for (_, cls), bases in classes.items() if bases & found} - found:
        found |= grown
    return {name for (name, cls) in classes if cls in found} - {"datamodules.batching"}


def _source_violations(trees: dict[str, ast.Module]) -> list[str]:
    """Modules other than the DataModule modules that import one, or read a DataModule's ``hparams``."""
    owners = _datamodule_modules(trees)
    bad = []
    for name, tree in sorted(trees.items()):
        if name in owners:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in owners:
                bad.append(f"{name} imports {node.module}")
            elif isinstance(node, ast.Import):
                bad += [f"{name} imports {a.name}" for a in node.names if a.name in owners]
            elif isinstance(node, ast.Attribute) and node.attr == "hparams":
                bad.append(f"{name} reads .hparams (line {node.lineno})")
    return bad


def test_source_check_finds_a_planted_violation():
    """The check below can fail: a source importing its DataModule module, one reading a DataModule's hparams."""
    trees = {"dm.base": ast.parse("class SplitDataModule: pass"),
             "dm.data": ast.parse("class D(SplitDataModule): pass"), "dm.src": ast.parse("from dm.data import D"),
             "dm.view": ast.parse("def read(dm): return dm.hparams.x")}
    assert _source_violations(trees) == ["dm.src imports dm.data", "dm.view reads .hparams (line 1)"]


def test_no_source_module_sees_its_datamodule():
    """Sources read a frozen spec (``datamodules.sources``), never the DataModule: no datamodules module other
    than the DataModule modules imports one (so no source module imports its DataModule module) or reads
    ``hparams``."""
    trees = {_module_name(p): ast.parse(p.read_text(encoding="utf-8")) for p in _files("datamodules")}
    owners = _datamodule_modules(trees)
    assert {"datamodules.captioning", "datamodules.sentiment", "datamodules.translation",
            "datamodules.digits", "datamodules.wikitext"} <= owners, owners
    sources = {"datamodules.caption_sources", "datamodules.sentiment_sources", "datamodules.parallel_files",
               "datamodules.bible", "datamodules.mnist5k", "datamodules.text_sources"}
    assert sources <= set(trees) - owners, sorted(sources - (set(trees) - owners))  # scanned, and not DataModules
    assert _source_violations(trees) == []


WINGS: dict[str, set[str]] = {
    "engine": set(),
    "verdicts": set(),
    "catalog": {"engine", "verdicts"},
    "reports": {"engine", "verdicts", "catalog"},
}
"""The wings of ``ablations`` and the wings each may import: the sweep engine and the verdict statistics stand
alone; the question catalogue reads sweep files and verdict rules; the findings and reports read all three. The
modules at the root (the command table, the runner, the stacked-seed trial, the findings command, the real-data
check) sit on top and may import any wing."""


def _wing(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "ablations" and parts[1] in WINGS else None


def test_ablations_wings_import_only_the_wings_below():
    """engine, verdicts <- catalog <- reports <- the root modules; a wing never imports the root or a wing above."""
    bad = sorted(f"{name} -> {target}" for name, targets in _import_graph().items() if (wing := _wing(name))
                 for target in targets if target.startswith("ablations") and _wing(target) != wing
                 and _wing(target) not in WINGS[wing])
    assert not bad, bad


def test_ablations_root_holds_at_most_six_modules_and_only_wings():
    """The root of ``ablations`` is the command layer; everything else lives in a wing."""
    root = sorted(p.name for p in (ROOT / "ablations").glob("*.py"))
    assert len(root) <= 6, root
    assert {p.name for p in (ROOT / "ablations").iterdir() if p.is_dir() and (p / "__init__.py").exists()} == set(WINGS)


FLOORS: dict[str, set[str]] = {
    "axes": set(), "protocols": set(), "validation": set(), "moved": set(), "blocks": set(), "scoring": set(),
    "policies": {"axes"},
    "registries": {"axes", "blocks", "policies"},
    "specs": {"axes", "blocks", "registries", "validation"},
    "builders": {"axes", "blocks", "registries", "specs"},
    "training": {"axes", "blocks", "policies", "registries", "scoring", "validation"},
    "callbacks": {"blocks", "protocols", "training"},
    "families": {"axes", "blocks", "builders", "callbacks", "policies", "protocols", "registries", "scoring", "specs",
                 "training", "validation"},
}
"""Each part of ``lit_models`` (a root module or a subpackage) and the parts it may import. Bottom up: the axis
words, the capabilities (``protocols``), the size checks, the old-path table, the plain-torch blocks and the
metrics import nothing of lit_models; the training policies read the axes; the wiring (registries <- specs <-
builders) reads those; the training pieces read the wiring, the policies and the metrics; the callbacks read the
training pieces; the families sit on top. ``__init__`` installs the old-path finder (``moved``) and nothing else."""


def _part(module: str) -> str:
    """The part a lit_models module belongs to: ``lit_models.families.seq2seq`` -> ``families``,
    ``lit_models.axes`` -> ``axes``, ``lit_models`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _lit_models_violations(graph: dict[str, set[str]], floors: dict[str, set[str]]) -> list[str]:
    """``importer -> imported`` for every import between two parts of lit_models that ``floors`` does not allow."""
    allowed = {**floors, "__init__": {"moved"}}
    return sorted(f"{name} -> {target}" for name, targets in graph.items() if name.split(".")[0] == "lit_models"
                  for target in targets if target.split(".")[0] == "lit_models" and _part(target) != _part(name)
                  and _part(target) not in allowed.get(_part(name), set()))


def test_lit_models_floor_check_finds_a_planted_upward_import():
    """The check below can fail: a training piece importing a family, a metric importing the wiring."""
    graph = {"lit_models.training.optim": {"lit_models.families.seq2seq", "lit_models.axes"},
             "lit_models.scoring.metrics": {"lit_models.registries"}}
    assert _lit_models_violations(graph, FLOORS) == ["lit_models.scoring.metrics -> lit_models.registries",
                                                     "lit_models.training.optim -> lit_models.families.seq2seq"]


def test_every_part_of_lit_models_has_a_floor():
    """A new root module or subpackage of lit_models must be placed in FLOORS (and so be checked)."""
    found = {p.stem for p in (ROOT / "lit_models").glob("*.py")} - {"__init__"}
    found |= {p.name for p in (ROOT / "lit_models").iterdir() if (p / "__init__.py").is_file()}
    assert found == set(FLOORS), found ^ set(FLOORS)


def test_lit_models_parts_import_only_the_floors_below():
    """Nothing in lit_models runs back up: the wiring never imports a training piece, a callback or a family;
    training never imports a callback or a family; the metrics import nothing of lit_models."""
    assert _lit_models_violations(_import_graph(), FLOORS) == []
