"""Files replaced all at once or not at all: SentencePiece models, prepared corpora, checkpoints.

The content goes to a temporary file in the target's directory (same filesystem), is fsynced and
``os.replace``-d over the target, so a crash mid-write leaves the previous file intact and no
half-written file under the target's name.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from attnlab_core.errors import exception_chain


def atomic_write(path: Path, data: bytes | Callable[[BinaryIO], None]) -> None:
    """Write ``data`` (bytes, or a function that writes into the open binary file) to ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _mode_for(path))  # mkstemp's 0600 would otherwise replace the target's mode
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except Exception as err:
        full = disk_full(path.parent, err)
        Path(tmp).unlink(missing_ok=True)
        if full is not None:  # torch's zip writer reports only "file write failed": say why, and where
            raise OSError(errno.ENOSPC, f"No space left on device ({full})", str(path)) from err
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _mode_for(path: Path) -> int:
    """The mode an ordinary write would leave: the target's own when it exists, else 0666 less the umask."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


FULL_BELOW = 1 << 20
"""Free bytes under which a failed write is put down to a full disk (what a torn write leaves free)."""


def disk_full(folder: Path, err: BaseException) -> str | None:
    """``<mount point>, <free> free`` when ``err`` (a failed write into ``folder``) came from a full disk:
    ENOSPC anywhere in its chain, or less than :data:`FULL_BELOW` bytes left there; else None."""
    nospace = any(isinstance(node, OSError) and node.errno in (errno.ENOSPC, errno.EDQUOT)
                  for node in exception_chain(err))
    try:
        stat = os.statvfs(folder)
    except OSError:
        return "disk" if nospace else None
    free = stat.f_bavail * stat.f_frsize
    if not nospace and free >= FULL_BELOW:
        return None
    return f"{mount_point(folder)}, {free // 1024} KiB free"


def mount_point(path: Path) -> Path:
    """The mount point of the filesystem holding ``path``."""
    path = Path(path).resolve()
    dev = path.stat().st_dev
    while path.parent != path and path.parent.stat().st_dev == dev:
        path = path.parent
    return path
