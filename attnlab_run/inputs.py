"""Paths named on the command line, checked before anything is created: the checkpoint, the data
files and folders. A problem is a :class:`UsageError` naming the path (one line, exit 2); no run
directory, no W&B run and no cache folder exists yet when these checks run.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from attnlab_core.errors import UsageError

CKPT_KEYWORDS = ("best", "last", "hpc", "registry")
"""``--ckpt_path`` values that name a checkpoint by role, resolved later (not files)."""
ZIP_MAGIC = b"PK\x03\x04"
"""The first bytes of a file ``torch.save`` writes (a zip archive)."""
CACHE_DIRS = ("data_dir",)
"""Data options that name a folder the datamodule creates (downloads, prepared corpora, tokenizers)."""


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """The checkpoint at ``path`` (loaded with ``weights_only=True``), or a UsageError saying why not.

    Missing, a directory, unreadable, not a torch file, or a torch file without ``state_dict``
    (e.g. a bare tensor dict) are each told apart in the message.
    """
    import torch

    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such checkpoint file")
    if path.is_dir():
        raise UsageError(f"{path}: is a directory, not a checkpoint file")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{path}: not readable (check its permissions)")
    with path.open("rb") as f:
        head = f.read(4)
    if not head:
        raise UsageError(f"{path}: not a checkpoint (the file is empty)")
    if head != ZIP_MAGIC and not head.startswith(b"\x80"):  # torch.save: a zip archive (legacy: a pickle)
        raise UsageError(f"{path}: not a checkpoint (not a file torch.save writes)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the unpickler's protocol notice: the error below says it all
            # mmap: the tensors stay on disk until read (a caller wants the hyper-parameters or the shapes, not
            # gigabytes of weights in memory); only the zip format torch.save writes since 1.6 can be mapped
            ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=head == ZIP_MAGIC)
    except Exception as err:  # noqa: BLE001 - pickle/zip/EOF/unsafe-type errors all mean "not ours"
        raise UsageError(f"{path}: not a checkpoint that loads safely ({_load_failure(err)})") from None
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt:
        raise UsageError(f"{path}: not a checkpoint (a Lightning checkpoint holds a state_dict)")
    return ckpt


def _load_failure(err: BaseException) -> str:
    """Why ``torch.load(weights_only=True)`` refused a file, in words (torch's own text is long and internal)."""
    text = str(err)
    if "Weights only load failed" in text or type(err).__name__ == "UnpicklingError":
        return "it holds Python objects beyond tensors and plain values, which weights_only loading refuses"
    if "zip archive" in text or isinstance(err, EOFError):
        return "the file is truncated or damaged"
    return type(err).__name__


def check_data_paths(init_args: Any) -> None:
    """Every ``*_path`` data option names an existing file, folder or file prefix (``prefix.de`` /
    ``prefix.en``); every other ``*_dir`` is an existing folder; cache folders (``data_dir``) can be
    created. Options left unset (None) are the datamodule's business."""
    items = vars(init_args).items() if hasattr(init_args, "__dict__") else dict(init_args or {}).items()
    for key, value in items:
        if not isinstance(value, (str, Path)) or not str(value):
            continue
        path = Path(value)
        if key in CACHE_DIRS:
            check_creatable(path, option=f"--data.{key}={value}")
        elif key.endswith("_path") and not (path.exists() or any(path.parent.glob(path.name + ".*"))):
            raise UsageError(f"--data.{key}={value}: no such file")
        elif key.endswith("_dir") and not path.is_dir():
            raise UsageError(f"--data.{key}={value}: no such folder")
        elif path.exists() and not os.access(path, os.R_OK):
            raise UsageError(f"--data.{key}={value}: not readable (check its permissions)")


def check_creatable(path: Path, *, option: str) -> None:
    """``path`` is a folder or can be made one: its nearest existing ancestor is a writable folder."""
    if path.exists():
        if not path.is_dir():
            raise UsageError(f"{option}: not a directory")
        return
    problem = creatable_problem(path)
    if problem is not None:
        raise UsageError(f"{option}: cannot create it, {problem}")


def nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def creatable_problem(path: Path) -> str | None:
    """Why the folder ``path`` could not be made (its nearest existing ancestor is no writable folder),
    or None when it exists as one or can be created. Nothing is created here."""
    ancestor = nearest_existing(path)
    if not ancestor.is_dir():
        return f"{ancestor} is not a directory"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"{ancestor} is not writable"
    return None


def check_checkpoint_fits(path: str | Path, model: Any) -> None:
    """The checkpoint's tensors load into ``model``: every shared key has the model's shape, and (when the
    model loads strictly, Lightning's default) neither side has keys the other lacks; else one line
    naming the first mismatches (instead of ``load_state_dict``'s traceback once the run has started)."""
    state = load_checkpoint(path)["state_dict"]
    own = model.state_dict()
    problems = [f"{k} has shape {tuple(v.shape)} in the checkpoint, {tuple(own[k].shape)} in the model"
                for k, v in state.items() if k in own and hasattr(v, "shape") and tuple(v.shape) != tuple(own[k].shape)]
    if getattr(model, "strict_loading", True):
        problems += [f"{k} is missing from the checkpoint" for k in own if k not in state]
        problems += [f"{k} is not in the model" for k in state if k not in own]
    if problems:
        more = f" (and {len(problems) - 2} more)" if len(problems) > 2 else ""
        raise UsageError(f"{path}: does not fit the model: {'; '.join(problems[:2])}{more}")
