"""The built wheel holds every package of the project (a non-editable install imports each model family).

A package listed by hand once missed ``lit_models.specs``, so a wheel built from the tree failed on
``from lit_models.specs import ...`` while every editable install worked (issue #44). The wheel is built from a
copy of the sources (the in-tree ``build/`` is never read, so a stale module there cannot hide a missing one) with
``pip wheel --no-deps --no-build-isolation`` (no download) and its file list is compared with the source tree.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]


def project_packages() -> tuple[str, ...]:
    """The project's top-level packages as setup.py declares them (its ``PROJECT``), read without running it."""
    tree = ast.parse((REPO / "setup.py").read_text())
    [value] = [node.value for node in tree.body if isinstance(node, ast.Assign)
               and [getattr(t, "id", None) for t in node.targets] == ["PROJECT"]]
    return tuple(ast.literal_eval(value))


PROJECT = project_packages()
TOP_FILES = ("pyproject.toml", "setup.py", "README.md", "LICENSE")


def _source_packages() -> set[str]:
    """Every importable package under the project's top-level packages: a folder holding Python files."""
    found = set()
    for top in PROJECT:
        for init in (REPO / top).rglob("*.py"):
            if "__pycache__" not in init.parts:
                found.add(".".join(init.parent.relative_to(REPO).parts))
    return found


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory) -> set[str]:
    src = tmp_path_factory.mktemp("src")
    for name in (n for n in TOP_FILES if (REPO / n).is_file()):
        shutil.copy2(REPO / name, src / name)
    for folder in (*PROJECT, "sweeps"):
        shutil.copytree(REPO / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    str(src), "-w", str(out)], check=True, capture_output=True, timeout=300)
    (wheel,) = out.glob("attnlab-*.whl")
    return set(zipfile.ZipFile(wheel).namelist())


def test_every_package_is_in_the_wheel(wheel_names):
    packages = _source_packages()
    assert {"lit_models.specs", "lit_models.blocks", "ablations.verdicts"} <= packages
    missing = sorted(p for p in packages if f"{p.replace('.', '/')}/__init__.py" not in wheel_names)
    assert missing == [], f"packages a non-editable install would lack: {missing}"


def test_the_wheel_carries_the_sweeps_and_configs_but_not_the_tests(wheel_names):
    sweeps = {p.name for p in (REPO / "sweeps").glob("*.yaml")}
    assert {n.removeprefix("attnlab_sweeps/") for n in wheel_names if n.startswith("attnlab_sweeps/")} >= sweeps
    configs = {p.name for p in (REPO / "ablations" / "configs").glob("*.yaml")}
    assert {n.rsplit("/", 1)[1] for n in wheel_names if n.startswith("ablations/configs/")} >= configs
    assert not [n for n in wheel_names if n.startswith(("tests/", "benchmarks/")) or "__pycache__" in n]
