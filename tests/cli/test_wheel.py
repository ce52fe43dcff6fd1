"""The built wheel holds every package of the project (a non-editable install imports each model family).

A package listed by hand once missed ``lit_models.specs``, so a wheel built from the tree failed on
``from lit_models.specs import ...`` while every editable install worked (issue #44). The wheel is built from a
copy of the sources (the in-tree ``build/`` is never read, so a stale module there cannot hide a missing one) with
``pip wheel --no-deps --no-build-isolation`` (no download) and its file list is compared with the source tree.
Without pip or setuptools>=77 in the environment (what ``--no-build-isolation`` builds with) the tests skip, naming
the line that installs them.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
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
SETUPTOOLS = 77
"""pyproject.toml's ``build-system.requires``: setuptools>=77."""
INSTALL = f'python -m pip install "setuptools>={SETUPTOOLS}"'


def build_tools_problem(version: Callable[[str], str] = importlib.metadata.version,
                        has_pip: bool | None = None) -> str | None:
    """Why this environment cannot build the wheel without a download (pip missing, setuptools missing or older
    than :data:`SETUPTOOLS`), with the line that fixes it; None when it can."""
    if not (importlib.util.find_spec("pip") is not None if has_pip is None else has_pip):
        return f"pip is not installed: python -m ensurepip --upgrade && {INSTALL}"
    try:
        found = version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return f"setuptools is not installed: {INSTALL}"
    major = found.split(".")[0]
    if not major.isdigit() or int(major) < SETUPTOOLS:
        return f"setuptools {found} is older than {SETUPTOOLS} (pyproject.toml's build requirement): {INSTALL}"
    return None


def test_missing_build_tools_name_their_install_line():
    assert build_tools_problem(lambda name: "76.1.0", has_pip=True) == (
        f'setuptools 76.1.0 is older than 77 (pyproject.toml\'s build requirement): {INSTALL}')
    assert "ensurepip" in build_tools_problem(lambda name: "80.0", has_pip=False)
    assert build_tools_problem(lambda name: "80.9.0", has_pip=True) is None


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
    problem = build_tools_problem()
    if problem is not None:
        pytest.skip(f"cannot build the wheel offline: {problem}")
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
