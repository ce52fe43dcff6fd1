"""The table of modules that left lit_models' root (``lit_models.moved``) is complete and each old path is the
new module: checked by walking the package on disk, not against git's history."""

from __future__ import annotations

import importlib
import sys
from importlib.machinery import PathFinder
from pathlib import Path

import pytest

from lit_models.moved import GROUPS, MOVED, OldPaths

PACKAGE = Path(__file__).parents[2] / "lit_models"
NOT_MOVED = {"blocks", "specs"}
"""Subpackages that were subpackages before the move: their modules kept their paths."""


def unaliased(package: Path, groups: dict[str, tuple[str, ...]]) -> list[str]:
    """Modules of the grouped subpackages (every subpackage of ``package`` but :data:`NOT_MOVED`) that
    ``groups`` does not list, and listed modules that are not there."""
    on_disk = {sub.name: {p.stem for p in sub.glob("*.py") if p.stem != "__init__"}
               for sub in package.iterdir() if (sub / "__init__.py").is_file() and sub.name not in NOT_MOVED}
    return sorted({f"{g}.{m} not in the table" for g, ms in on_disk.items() for m in ms - set(groups.get(g, ()))}
                  | {f"{g}.{m} not on disk" for g, ms in groups.items() for m in set(ms) - on_disk.get(g, set())})


def test_the_completeness_check_can_fail(tmp_path):
    (tmp_path / "families").mkdir()
    for name in ("__init__", "seq2seq", "newcomer"):
        (tmp_path / "families" / f"{name}.py").write_text("")
    assert unaliased(tmp_path, {"families": ("seq2seq", "gone")}) == ["families.gone not on disk",
                                                                       "families.newcomer not in the table"]


def test_every_module_of_the_grouped_subpackages_has_its_old_path():
    assert unaliased(PACKAGE, GROUPS) == []


def test_no_old_path_is_a_module_again():
    """An old path that names a file at the root again would be shadowed by it (or shadow it)."""
    root = {p.stem for p in PACKAGE.glob("*.py")} | {p.name for p in PACKAGE.iterdir() if p.is_dir()}
    assert not {old.rpartition(".")[2] for old in MOVED} & root


@pytest.mark.parametrize("old", sorted(MOVED))
def test_each_old_path_imports_the_new_module(old):
    module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old]) is sys.modules[old]
    assert module.__name__ == module.__spec__.name == MOVED[old]


def test_the_finder_is_installed_once_ahead_of_the_path_finder():
    """Ahead of the path finder and of an editable install's finder, which would answer an old path with the
    module of another checkout (this one's old files are gone, another's may not be)."""
    import lit_models.moved

    lit_models.moved.install()
    finders = [i for i, f in enumerate(sys.meta_path) if isinstance(f, OldPaths)]
    assert len(finders) == 1 and finders[0] < sys.meta_path.index(PathFinder)
