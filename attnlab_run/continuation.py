"""A resume continues the same run or is refused; a branch is a new run that starts from another's checkpoint.

``fit --ckpt_path last`` (and the automatic resume of a preempted run, ``rundir.resume_preempted``) compares
the whole new configuration with the run's saved ``config.yaml``, key by key as the W&B config shows them
(``model.dropout``, ``data.train_size``, ``trainer.max_steps``). Only :data:`EXTENDABLE` keys may differ:
the step, epoch and time limits, which extend training, and options that change only what is logged,
where or how often (and the three that locate the run, whose directory is the same by construction).
Any other difference is refused in one line that names each key (saved → new), before anything is written
(``docs/reliability.md``, "A run's record"). To change anything else, branch: ``--run.branch_from``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from attnlab_core.errors import UsageError
from attnlab_run.rundir import RunPaths
from attnlab_run.trainer_setup import flatten
from lit_models.moved import current_paths

EXTENDABLE = frozenset({
    # the limits of training: a resume exists to raise them
    "trainer.max_steps", "trainer.max_epochs", "trainer.max_time", "trainer.min_steps", "trainer.min_epochs",
    # what is logged, where and how often; never what is trained
    "trainer.enable_progress_bar", "trainer.enable_model_summary", "trainer.log_every_n_steps", "trainer.logger",
    "trainer.profiler", "trainer.callbacks", "trainer.enable_autolog_hparams", "trainer.model_registry",
    "run.wandb_project", "run.figure_drawings", "run.log_model", "run.checkpoint_every_n_steps", "run.test_after_fit",
    # where the run is (they chose this very directory)
    "run.root", "run.experiment", "run.name", "trainer.default_root_dir",
})
"""The keys a resume may change; every other key of the saved ``config.yaml`` must be the same."""

NOT_COMPARED = frozenset({"ckpt_path", "weights_only", "config"})
"""Keys of the command, not of the run: which checkpoint to start from and how to load it, which files were read."""


def comparable(flat: Mapping[str, Any]) -> dict[str, Any]:
    """The keys a resume compares: not :data:`NOT_COMPARED`, and not a checkpoint's hyper-parameters that a
    resumed fit's config carries as ``model.dict_kwargs.*`` (they are the run's own, from its checkpoint). A class
    path saved before lit_models' modules moved is compared as it is named now."""
    return current_paths({k: v for k, v in flat.items() if k not in NOT_COMPARED and ".dict_kwargs" not in k})


def saved_config(run_dir: Path) -> dict[str, Any] | None:
    """The run's saved ``config.yaml`` as flat keys; None when it has none (nothing to compare with)."""
    try:
        return flatten(RunPaths(Path(run_dir)).config.read_text())
    except (OSError, yaml.YAMLError):
        return None


def fit_arm(run_dir: Path, axes: tuple[str, ...]) -> dict[str, Any] | None:
    """``{short name: value}`` of each axis as the fit's saved ``config.yaml`` has it (an evaluation is tagged
    with the arm of the run it evaluates, not the one its own ``--config`` names); None without a saved fit."""
    saved = saved_config(run_dir)
    if saved is None:
        return None
    return {axis.rsplit(".", 1)[-1]: saved[axis] for axis in axes if saved.get(axis) is not None}


def differences(saved: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, saved value, new value) of every compared key, not :data:`EXTENDABLE`, whose value changed.
    A key only one side has (a config written by another attnlab version) is not compared."""
    old, now = comparable(saved), comparable(new)
    return [(k, old[k], now[k]) for k in sorted(old.keys() & now.keys()) if k not in EXTENDABLE and old[k] != now[k]]


def _shown(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True)


def refuse_changed_resume(run_dir: Path, new: Mapping[str, Any]) -> None:
    """Refuse a resume of ``run_dir`` whose config ``new`` (flat keys) differs from the saved one beyond
    :data:`EXTENDABLE`: one line naming each key, its saved and its new value."""
    saved = saved_config(run_dir)
    changed = differences(saved, new) if saved is not None else []
    if changed:
        keys = ", ".join(f"{k}: {_shown(a)} → {_shown(b)}" for k, a, b in changed)
        raise UsageError(f"--ckpt_path last continues {run_dir} as it was trained, but its config.yaml differs in "
                         f"{keys}; drop those options, or start a new run from its checkpoint with "
                         f"--run.name NEW --run.branch_from {run_dir}")


def run_seed(run_dir: Path, seed: Any) -> Any:
    """The seed a resume uses: the run's own when the command asks for a fresh random one (``True``, the
    CLI's default without ``--seed_everything``), so resuming never renames or reseeds the run."""
    if seed is True:
        saved = saved_config(run_dir) or {}
        return saved.get("seed_everything", seed)
    return seed


def branch_checkpoint(branch_from: str) -> Path:
    """The checkpoint ``--run.branch_from`` names: a ``.ckpt`` file, or a run directory's ``last.ckpt``."""
    path = Path(branch_from)
    ckpt = RunPaths(path).checkpoint("last") if path.is_dir() else path
    if not ckpt.is_file():
        raise UsageError(f"--run.branch_from={branch_from}: no checkpoint at {ckpt} (give a run directory "
                         "holding checkpoints/last.ckpt, or a .ckpt file)")
    return ckpt


def parent_record(ckpt: Path) -> dict[str, Any]:
    """What a branch records of its parent: the run directory (when the checkpoint lies in one), the checkpoint
    and the parent's W&B run id."""
    from attnlab_run.rundir import read_summary

    run = ckpt.resolve().parent.parent if ckpt.resolve().parent.name == "checkpoints" else None
    summary = read_summary(run) if run is not None else None
    record = {"run_dir": str(run) if run is not None else None, "checkpoint": str(ckpt.resolve()),
              "wandb_run_id": summary.wandb_run_id if summary is not None else None}
    return {k: v for k, v in record.items() if v is not None}
