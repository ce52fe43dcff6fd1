"""The one file-tree snapshot of the CLI tests: "nothing created, lost or overwritten" is ``tree(root)`` before
and after a command, equal."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path


def tree(root: Path, *, skip: Callable[[Path], bool] = lambda rel: False) -> dict[str, str | None]:
    """Every path under ``root`` (relative) with the sha256 of its bytes, None for a folder; ``skip(relative
    path)`` leaves a path out (a folder's content is still listed unless skipped too)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
            for p in sorted(Path(root).rglob("*")) if not skip(p.relative_to(root))}


def one_line(capsys, argv: list[str], root: Path, *, prefix: str = "attnlab: error: ") -> str:
    """``attnlab argv`` run in-process is refused: exit 2, exactly one stderr line starting with ``prefix``, no
    traceback, nothing on stdout, and the tree under ``root`` byte-identical; the line."""
    import pytest

    from attnlab.cli import main

    before = tree(root)
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(prefix), err[:3000]
    assert "Traceback" not in err and out == "", (out, err[:3000])
    assert tree(root) == before, "the file tree changed"
    return lines[0]


def in_sandbox(tmp_path: Path, monkeypatch) -> Path:
    """Run a CLI test from ``tmp_path`` with W&B off and no run directory or W&B run id inherited."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "disabled")
    for name in ("ATTNLAB_RUN_DIR", "WANDB_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path
