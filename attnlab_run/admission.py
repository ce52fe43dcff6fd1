"""The refusals before a run starts: every check of a command's input and of its run directory that can refuse it,
in one pass that moves and writes nothing, then (accepted) the moves it asks for and the claim of the directory.

Bad input is one line and exit 2 (``attnlab_run.cli``); the run directory is left as found: a ``--run.restart``
moves the old run aside, and a retried fit sets its old ``metrics.csv`` aside, only after every refusal passed
(``_accepted``). Ownership, crashed runs and DDP ranks: :mod:`attnlab_run.ownership`, :mod:`attnlab_run.launch`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from attnlab_core.errors import UsageError
from attnlab_run.continuation import branch_checkpoint, parent_record, refuse_changed_resume, run_seed
from attnlab_run.conventions import refuse_disabled_logger, run_root
from attnlab_run.evaluations import fit_checkpoint
from attnlab_run.guards import check_parsed
from attnlab_run.inputs import check_data_paths, nearest_existing
from attnlab_run.memory import check_config_memory
from attnlab_run.ownership import claim_all, move_aside, own_run_dir
from attnlab_run.recording import RunOptions
from attnlab_run.rundir import (
    RunPaths,
    check_writable,
    default_experiment,
    named_checkpoint,
    refuse_finished_run,
    resolve_run_dir,
    resume_preempted,
    set_aside_stale_log,
    stable_run_name,
)
from attnlab_run.trainer_setup import flatten

log = logging.getLogger(__name__)


def _save_experiment(cfg: Any, experiment: str) -> None:
    """Write the resolved experiment name into the config that ``config.yaml`` saves, so re-running
    ``<run>/config.yaml`` lands in the same experiment (not in one named after the file, ``config``)."""
    if isinstance(cfg.run, dict):
        cfg.run["experiment"] = experiment
    else:
        cfg.run.experiment = experiment


class Admission:
    """The part of :class:`attnlab_run.command.AttnlabCLI` that admits a command (``_prepare_run``, called by its
    ``_set_seed`` before anything is seeded, built or created)."""

    fresh: tuple[Path, Path] | None = None
    """(run directory, its nearest existing ancestor) when this command creates the run directory:
    refused input found later (e.g. in the data) removes what it created, up to that ancestor."""
    continued: bool = False
    """This ``fit`` continues its run: its config was compared with the run's (``continuation``)."""
    parent: dict[str, Any] | None = None
    """This ``fit`` branches from another run's checkpoint: what it records of that parent."""

    def _prepare_run(self) -> None:
        cfg = self.config[self.subcommand]
        check_parsed(cfg)
        check_config_memory(cfg, subcommand=self.subcommand, argv=self.argv)
        data = cfg.get("data")
        check_data_paths(data.get("init_args") if data is not None else None)
        configs = cfg.get("config") or []
        self.run_opts = RunOptions(**vars(cfg.run)) if not isinstance(cfg.run, dict) else RunOptions(**cfg.run)
        self.run_opts.root = run_root(self.run_opts.root, cfg.trainer.get("default_root_dir"))
        refuse_disabled_logger(cfg.trainer.get("logger"))
        self.run_dir = resolve_run_dir(self.run_opts, default_experiment=default_experiment(configs),
                                       ckpt_path=cfg.get("ckpt_path"))
        check_writable(self.run_dir)
        type(self).fresh = None if self.run_dir.exists() else (self.run_dir, nearest_existing(self.run_dir))
        restart = self.subcommand == "fit" and self.run_opts.restart  # the old run will be moved aside
        own_run_dir(self.run_dir, subcommand=self.subcommand, ckpt_path=cfg.get("ckpt_path"),
                    restart=self.run_opts.restart)
        if not restart:
            refuse_finished_run(self.run_dir, subcommand=self.subcommand, ckpt_path=cfg.get("ckpt_path"))
        cfg.ckpt_path = resume_preempted(self.run_dir, subcommand=self.subcommand, ckpt_path=cfg.get("ckpt_path"),
                                         restart=restart)
        if self.subcommand == "fit":
            _save_experiment(cfg, self.run_dir.parent.name)
        stale_log = self.subcommand == "fit" and not cfg.get("ckpt_path")  # a fresh fit: not appended to
        self._continue_or_branch(cfg, restart=restart)
        if self.subcommand != "fit" and not cfg.get("ckpt_path"):
            cfg.ckpt_path = fit_checkpoint(self.run_dir, self.subcommand)  # never an untrained model under a fit
        if cfg.get("ckpt_path") in ("best", "last") and stable_run_name(self.run_opts) is None:
            raise UsageError(f"--ckpt_path={cfg.ckpt_path} needs --run.name (the run to continue or evaluate)")
        if self.subcommand != "fit" and cfg.get("ckpt_path") in ("best", "last"):
            cfg.ckpt_path = str(named_checkpoint(self.run_dir, cfg.ckpt_path))
            self._parse_ckpt_path()
        elif cfg.get("ckpt_path") == "last" and (self.run_dir / "checkpoints" / "last.ckpt").is_file():
            cfg.ckpt_path = str(self.run_dir / "checkpoints" / "last.ckpt")  # found whatever the W&B run id
            self._parse_ckpt_path()  # a checkpoint of another family is refused before anything runs
        self._accepted(restart=restart, stale_log=stale_log)

    def _accepted(self, *, restart: bool, stale_log: bool) -> None:
        """Every refusal has passed: only now move things (``--run.restart`` moves the old run aside, a fresh fit
        sets an old ``metrics.csv`` aside), then claim the run directory (its lock file names this process)."""
        moved = move_aside(self.run_dir) if restart else None
        if moved is not None:
            log.warning("--run.restart: the previous run in %s was moved to %s", self.run_dir, moved)
            type(self).fresh = (self.run_dir, self.run_dir.parent)
        elif stale_log:
            set_aside_stale_log(self.run_dir)
        claim_all()

    def _continue_or_branch(self, cfg: Any, *, restart: bool) -> None:
        """``fit`` with a checkpoint of this very run continues it exactly (``continuation``: a changed key is
        refused); ``--run.branch_from`` starts this new run from another run's checkpoint and records it as the
        parent; ``--ckpt_path best`` (Lightning refuses it for fit, after the run was marked) is one line."""
        if self.subcommand != "fit":
            return
        ckpt = cfg.get("ckpt_path")
        if ckpt == "best":
            raise UsageError("--ckpt_path=best is for test/validate: fit continues a run with --ckpt_path last, or "
                             "starts a new run from another run's checkpoint with --run.branch_from")
        if self.run_opts.branch_from and (restart or not RunPaths(self.run_dir).checkpoint("last").is_file()):
            parent = branch_checkpoint(self.run_opts.branch_from)
            if ckpt not in (None, "last") or parent.resolve().parent.parent == self.run_dir.resolve():
                raise UsageError(f"--run.branch_from={self.run_opts.branch_from} starts a new run from that "
                                 "checkpoint: give a new --run.name, and no --ckpt_path")
            cfg.ckpt_path, self.parent = str(parent), parent_record(parent)
            self._parse_ckpt_path()  # the checkpoint decides the model, as for an evaluation
        elif ckpt and RunPaths(self.run_dir).config.is_file():
            cfg.seed_everything = run_seed(self.run_dir, cfg.get("seed_everything"))
            dumped = self._parser(self.subcommand).dump(cfg, skip_none=False, format="yaml")
            refuse_changed_resume(self.run_dir, flatten(dumped))
            self.continued = True

