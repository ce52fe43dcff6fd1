"""attnlab: a PyTorch Lightning experiment suite for attention mechanisms.

``attnlab.cli`` is the command layer on top: it dispatches to the Lightning subcommands in
``attnlab_run.cli`` and to the experiment commands in ``ablations.commands``; nothing below imports it.
"""

from __future__ import annotations


def version() -> str:
    """The installed distribution's version (the source tree's pyproject version when not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("attnlab")
    except PackageNotFoundError:
        import re
        from pathlib import Path

        text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
        found = re.search(r'^version = "([^"]+)"', text, re.MULTILINE)
        return found.group(1) if found else "unknown"
