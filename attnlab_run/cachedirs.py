"""Where the libraries under a run keep their caches, so a command writes only inside its run root and
one documented cache (``docs/reliability.md``, "Outside the run root").

- matplotlib's config and font cache (``MPLCONFIGDIR``) and torch inductor's cache
  (``TORCHINDUCTOR_CACHE_DIR``, which torch creates when Lightning imports it, even for a refused
  command) go to the attnlab cache, :func:`attnlab_cache` (``$ATTNLAB_CACHE_DIR``, else
  ``$XDG_CACHE_HOME/attnlab``, else ``~/.cache/attnlab``). Both are read when the libraries are imported,
  before any run directory is known, so they are set when ``attnlab_run`` is imported.
- W&B's cache (artifacts, and wandb-core's and its system monitor's debug logs, ``WANDB_CACHE_DIR``) and
  its staging folder (``WANDB_DATA_DIR``) go inside the run directory, beside the run's own ``wandb/``
  folder (``<run>/wandb_cache``, ``<run>/wandb_data``; :func:`route_wandb_dirs`, called before the loggers
  are built; ``wandb sync <run>/wandb/`` reads only the run folders).

A variable the user set is left as it is.
"""

from __future__ import annotations

import os
from pathlib import Path

LIBRARY_CACHES = {"MPLCONFIGDIR": "matplotlib", "TORCHINDUCTOR_CACHE_DIR": "torchinductor"}
"""Environment variable -> folder under :func:`attnlab_cache`."""
RUN_FOLDERS = {"WANDB_CACHE_DIR": "wandb_cache", "WANDB_DATA_DIR": "wandb_data"}
"""Environment variable -> folder under the run directory."""
_SET_HERE: set[str] = set()
"""The variables this process set (a later command in the same process moves them to its own run)."""


def attnlab_cache() -> Path:
    """The one cache outside run roots: ``$ATTNLAB_CACHE_DIR``, else ``$XDG_CACHE_HOME/attnlab``, else
    ``~/.cache/attnlab``."""
    if os.environ.get("ATTNLAB_CACHE_DIR"):
        return Path(os.environ["ATTNLAB_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "attnlab"


def route_library_caches() -> None:
    """Point matplotlib's and inductor's caches at :func:`attnlab_cache` unless the user chose them."""
    for name, folder in LIBRARY_CACHES.items():
        if name not in os.environ or name in _SET_HERE:
            os.environ[name] = str(attnlab_cache() / folder)
            _SET_HERE.add(name)


def route_wandb_dirs(run_dir: Path) -> None:
    """Point W&B's cache and staging folders into ``run_dir`` unless the user chose them."""
    for name, folder in RUN_FOLDERS.items():
        if name not in os.environ or name in _SET_HERE:
            os.environ[name] = str(Path(run_dir) / folder)
            _SET_HERE.add(name)
