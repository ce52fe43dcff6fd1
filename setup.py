"""The package list, found rather than written by hand; everything else is declared in pyproject.toml.

setuptools' ``[tool.setuptools.packages.find]`` cannot add a package whose folder has another name, and the sweep
files (sweeps/) install as the data-only package ``attnlab_sweeps`` (pyproject.toml's package-dir), so the list is
computed here: every package under the project's top-level packages (namespace discovery, so the data-only
``ablations.configs`` is a package too), plus ``attnlab_sweeps``.
"""

from setuptools import find_namespace_packages, setup

PROJECT = ("attnlab", "attnlab_core", "attnlab_run", "lit_models", "datamodules", "ablations")
"""The project's top-level packages: declared here only (tests/cli/test_wheel.py reads it without running this)."""

setup(packages=[*find_namespace_packages(include=[f"{p}{tail}" for p in PROJECT for tail in ("", ".*")],
                                         exclude=["*.__pycache__", "*.__pycache__.*"]),
                "attnlab_sweeps"])
