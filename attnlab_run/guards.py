"""Checks the CLI runs on the parsed command before anything is seeded, built or created, and the
outcome a script reads from the exit status.

- :func:`check_parsed` — run and experiment names (:func:`attnlab_run.rundir.check_name`) and model
  sizes (:func:`lit_models.validation.check_model_sizes`), so bad values are one line at parse time.
- :func:`refuse_moot_overrides` — a ``--model.*`` option that a loaded checkpoint would override is
  refused rather than silently dropped.
- :data:`DIVERGED_EXIT` — the exit status of a fit that diverged (non-finite loss).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attnlab_core.errors import UsageError
from attnlab_run.rundir import check_name
from lit_models.validation import check_model_sizes

DIVERGED_EXIT = 3
"""Exit status of a ``fit`` that stopped on a non-finite loss (``summary.json`` says ``diverged``):
distinct from 0 (finished), 1 (a crash), 2 (bad input) and 128+N (preempted by signal N)."""


def _as_dict(node: Any) -> dict[str, Any]:
    if node is None:
        return {}
    return dict(vars(node)) if hasattr(node, "__dict__") else dict(node)


def check_parsed(cfg: Any) -> None:
    """The parsed subcommand config ``cfg``: ``--run.name`` / ``--run.experiment`` are safe names, and
    every model size is a positive integer (heads dividing d_model)."""
    run = _as_dict(cfg.get("run"))
    for key in ("experiment", "name"):
        if run.get(key) is not None:
            check_name(run[key], option=f"--run.{key}")
    model = cfg.get("model")
    init_args = model.get("init_args") if model is not None and hasattr(model, "get") else None
    check_model_sizes(_as_dict(init_args))
    check_trainer(_as_dict(cfg.get("trainer")))


TRAINER_RULES = {
    "max_steps": ("-1 (no limit) or an integer >= 0", lambda v: v >= -1),
    "max_epochs": ("-1 (no limit) or an integer >= 0", lambda v: v >= -1),
    "val_check_interval": ("a number > 0 (a fraction of an epoch <= 1, or a count of batches)", lambda v: v > 0),
    "check_val_every_n_epoch": ("an integer >= 1", lambda v: v >= 1),
    "accumulate_grad_batches": ("an integer >= 1", lambda v: v >= 1),
}
"""Lightning Trainer options that Lightning itself takes without a check and then fails on mid-run
(``val_check_interval=0``: a ZeroDivisionError; ``max_steps=-5``: a traceback): (the rule, a test)."""


def check_trainer(trainer: dict[str, Any]) -> None:
    """Refuse a :data:`TRAINER_RULES` option outside its range, naming the option and the rule."""
    for name, (rule, ok) in TRAINER_RULES.items():
        value = trainer.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not (value == value and ok(value)):
            raise UsageError(f"--trainer.{name}={value} is not allowed: it must be {rule}")


def command_line_keys(argv: Sequence[str], *, group: str = "model") -> set[str]:
    """Keys of ``group`` set by ``--group.KEY=V`` / ``--group.init_args.KEY V`` on the command line."""
    keys = set()
    for arg in argv:
        if arg.startswith(f"--{group}."):
            key = arg[len(group) + 3:].split("=", 1)[0].removeprefix("init_args.")
            if key and key != "class_path":
                keys.add(key)
    return keys


def refuse_moot_overrides(ckpt_path: str, *, hparams: Mapping[str, Any], configured: Mapping[str, Any],
                          given: set[str]) -> None:
    """A checkpoint's hyper-parameters decide the model it loads into; an option from the command line
    that asks for a different value would be dropped without notice, so it is refused, naming the keys."""
    moot = sorted(k for k in given & set(hparams) if configured.get(k) != hparams[k])
    if moot:
        asked = ", ".join(f"--model.{k}={configured.get(k)} (checkpoint: {hparams[k]})" for k in moot)
        raise UsageError(f"{ckpt_path} fixes the model it loads into, so {asked} cannot apply; "
                         "drop the option, or fit a new run to change the model")


def remove_fresh(fresh: tuple[Path, Path] | None) -> None:
    """Remove a run directory this command created (and the empty folders it made above it): input
    refused after the loggers started (data checked in ``setup``) leaves no run behind."""
    if fresh is None:
        return
    run_dir, ancestor = fresh
    shutil.rmtree(run_dir, ignore_errors=True)
    for folder in run_dir.parents:
        if folder == ancestor or not folder.is_dir() or any(folder.iterdir()):
            break
        folder.rmdir()
