"""Whether the real data is in place: what ``attnlab findings --real`` checks before it runs a real-data question
(``ablations.catalog.questions_real``). The versions its README's header names come from
``ablations.reports.provenance``.

Kept apart from the questions so that the question catalogue imports nothing of the runner.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from ablations.catalog.questions import REPO, Question
from ablations.runner import load_sweep, make_plan


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
