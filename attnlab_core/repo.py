"""The one git helper: a git command's output, or None (never raises), for run records and findings provenance."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path


def git(args: Sequence[str], cwd: Path) -> str | None:
    """``git <args>``'s stripped output in ``cwd``, or None when git fails, is absent or prints nothing."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None
