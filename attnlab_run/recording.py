"""The run-directory contract: ``<root>/<experiment>/<run_name>/`` with config.yaml, metrics.csv,
summary.json, checkpoints/ and figures/; loggers (CSV always, W&B unless disabled) and the
summary callback. The report, the sweep runner and every check read only this layout.
"""

from __future__ import annotations

import csv
import logging
import os
import secrets
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import lightning as L
import torch
from jsonargparse.typing import PositiveInt
from lightning.pytorch.loggers import CSVLogger, Logger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.loggers.logger import rank_zero_experiment

from attnlab_core.errors import UsageError, user_error_line
from attnlab_run.environment import environment
from attnlab_run.faults import is_preemption, preemption_exit_code
from attnlab_run.rundir import (
    DONE,
    Evaluation,
    RunPaths,
    Status,
    check_name,
    evaluation_id,
    read_summary,
    record_evaluation,
    run_dir_in,
    safe_name,
    write_summary,
)
from attnlab_run.wandb_mode import wandb_mode
from attnlab_run.wandb_run import WandbIdentity, wandb_logger, wandb_run_id

log = logging.getLogger(__name__)
RUN_DIR_ENV = "ATTNLAB_RUN_DIR"
RESUME_ENV = "ATTNLAB_RESUME_CKPT"


@dataclass
class RunOptions:
    """Where a run writes and what it checkpoints on.

    Args:
        root: directory holding all experiments.
        experiment: experiment (group) name; default: the --config file's stem.
        name: run name; default: a fresh timestamped name (two runs never collide).
        monitor: metric that selects the best checkpoint.
        mode: min or max for ``monitor``.
        wandb_project: W&B project of the run; default: ``$WANDB_PROJECT`` (a sweep agent sets it to
            the sweep's project), else ``attnlab``.
        checkpoint_every_n_steps: also refresh ``last.ckpt`` every N optimizer steps (0: only after
            each validation); bounds the work a crash or SIGKILL can cost.
        test_after_fit: after a finished ``fit``, test the best checkpoint in the same process and
            the same W&B run (for questions answered by a ``test/`` metric).
        figure_drawings: with W&B, the most attention-figure drawings one ``fit`` keeps, at validations
            spread evenly over training (``figures.AttentionFigures``); without W&B one is drawn, at the end.
        log_model: upload the best checkpoint to W&B as a model artifact (Lightning's WandbLogger
            ``log_model``: true = at the end of the fit, ``all`` = every time one is saved); online only,
            an offline run keeps its checkpoints in ``<run>/checkpoints``.
    """

    root: str = "runs"
    experiment: str | None = None
    name: str | None = None
    monitor: str = "val/loss"
    mode: Literal["min", "max"] = "min"
    wandb_project: str | None = None
    checkpoint_every_n_steps: int = 0
    test_after_fit: bool = False
    figure_drawings: PositiveInt = 8
    log_model: bool | Literal["all"] = False


def fresh_run_name() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def _inherited_run_dir() -> Path | None:
    """DDP ranks > 0 re-execute the CLI; they reuse the directory rank 0 chose (passed by env)."""
    child = any(os.environ.get(k, "0") not in ("", "0") for k in ("LOCAL_RANK", "RANK", "NODE_RANK"))
    inherited = os.environ.get(RUN_DIR_ENV)
    return Path(inherited) if child and inherited else None


def stable_run_name(opts: RunOptions) -> str | None:
    """``--run.name``, else the W&B run id a sweep agent exports (``WANDB_RUN_ID``): a requeued
    (preempted) trial keeps its id, so it lands in the same run directory and resumes there."""
    return opts.name or os.environ.get("WANDB_RUN_ID") or None


def resume_preempted(run_dir: Path, *, subcommand: str, ckpt_path: str | None) -> str | None:
    """``fit`` of a run directory whose summary says preempted continues from its ``last.ckpt``.

    Decided once, by the launching process; DDP ranks > 0 (which start later, when the summary
    already says "running") inherit the decision through the environment.
    """
    if _inherited_run_dir() is not None:
        return os.environ.get(RESUME_ENV) or ckpt_path
    last = run_dir / "checkpoints" / "last.ckpt"
    if subcommand == "fit" and not ckpt_path and read_summary(run_dir).status is Status.PREEMPTED and last.is_file():
        log.warning("%s was preempted: continuing from %s", run_dir, last)
        ckpt_path = "last"
    os.environ[RESUME_ENV] = ckpt_path or ""
    return ckpt_path


def set_aside_stale_log(run_dir: Path) -> None:
    """A fresh ``fit`` in a directory that has a log (e.g. a failed attempt retried under the same
    name) keeps that log as ``metrics.prev<N>.csv`` instead of appending to it."""
    log_file = run_dir / "metrics.csv"
    if _inherited_run_dir() is None and log_file.is_file():
        n = 1
        while (run_dir / f"metrics.prev{n}.csv").exists():
            n += 1
        log_file.rename(run_dir / f"metrics.prev{n}.csv")


def resolve_run_dir(opts: RunOptions, *, default_experiment: str, ckpt_path: str | None) -> Path:
    """Pick the run directory: the checkpoint's own run, the inherited one, or a fresh one."""
    inherited = _inherited_run_dir()
    if inherited is not None:
        return inherited
    experiment = check_name(opts.experiment, option="--run.experiment") if opts.experiment is not None else (
        safe_name(default_experiment))
    name = check_name(opts.name, option="--run.name") if opts.name is not None else stable_run_name(opts)
    options = ("--run.experiment", "--run.name" if opts.name is not None else "WANDB_RUN_ID")
    if ckpt_path and Path(ckpt_path).parent.name == "checkpoints":  # the checkpoint's own run, in its own root
        run_dir = Path(ckpt_path).resolve().parent.parent
    else:
        run_dir = run_dir_in(Path(opts.root), experiment, name or fresh_run_name(), options=options)
        while name is None and run_dir.exists():
            run_dir = run_dir_in(Path(opts.root), experiment, fresh_run_name(), options=options)
    os.environ[RUN_DIR_ENV] = str(run_dir)
    return run_dir


def check_writable(run_dir: Path) -> None:
    """The run directory must be creatable: its nearest existing ancestor is a writable directory.

    Nothing is created here (a later error must not leave an empty run directory behind).
    """
    ancestor = run_dir
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(f"cannot create the run directory {run_dir}: {ancestor} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise UsageError(f"cannot create the run directory {run_dir}: {ancestor} is not writable")


def refuse_finished_run(run_dir: Path, *, subcommand: str, ckpt_path: str | None) -> None:
    """A new ``fit`` must not overwrite a finished run; resuming it (``--ckpt_path``) is fine."""
    status = read_summary(run_dir).status
    if subcommand == "fit" and not ckpt_path and status in DONE:
        raise UsageError(
            f"{run_dir} already holds a {status.value} run; choose another --run.name "
            "or continue it with --ckpt_path last"
        )


def named_checkpoint(run_dir: Path, which: str) -> Path:
    """``best`` / ``last`` of a run; a missing run or checkpoint is a usage error naming the path."""
    path = run_dir / "checkpoints" / f"{which}.ckpt"
    if which == "best" and not path.is_file() and (run_dir / "checkpoints" / "last.ckpt").is_file():
        validated = any(k.startswith("val/") for k in read_summary(run_dir).metrics)
        why = ("its validations never logged the monitored metric (--run.monitor)" if validated else
               "the run never validated (it stopped before its first validation)")
        raise UsageError(f"--ckpt_path=best: {run_dir} has no best checkpoint: {why}; use --ckpt_path last")
    if not path.is_file():
        raise UsageError(f"--ckpt_path={which}: no checkpoint at {path} (give --run.name of a finished run)")
    return path


class _AppendingWriter(ExperimentWriter):
    """Lightning's CSV writer, safe to reopen on resume. Lightning 2.6 deletes an existing
    ``metrics.csv`` when the writer is created (a resumed run would lose its whole log); this one
    keeps it, starts from its header (so the first save appends) and rewrites the header atomically
    when new columns appear. Rows of steps redone after a crash appear twice; the later one counts."""

    def _check_log_dir_exists(self) -> None:
        """Keep the existing metrics.csv (Lightning removes it here)."""

    def __init__(self, log_dir: str) -> None:
        super().__init__(log_dir)
        path = Path(self.metrics_file_path)
        if path.is_file():
            with path.open(newline="") as f:
                self.metrics_keys = sorted(next(csv.reader(f), []))

    def _rewrite_with_new_header(self, fieldnames: list[str]) -> None:
        path = Path(self.metrics_file_path)
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fieldnames)
            writer.writeheader()
            writer.writerows(rows)
        os.replace(tmp, path)


class ResumableCSVLogger(CSVLogger):
    """CSVLogger whose ``metrics.csv`` survives a resume: earlier rows are kept and new ones appended."""

    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _AppendingWriter(log_dir=self.log_dir)
        return self._experiment


def build_loggers(run_dir: Path, opts: RunOptions, *, subcommand: str, identity: WandbIdentity,
                  evaluation: str | None = None) -> list[Logger]:
    """CSV always; W&B unless WANDB_MODE=disabled (online or offline as :func:`wandb_mode` decides).

    ``fit`` logs to ``<run>/metrics.csv``; an evaluation of the run logs to its own folder
    (``<run>/test/<evaluation>/metrics.csv``, ``<run>/predict/``), so neither the training log nor
    another evaluation's is overwritten, and to its own W&B run (:mod:`attnlab_run.wandb_run`).
    The CSV logger comes first: Lightning saves ``config.yaml`` in the first logger's folder.
    """
    paths = RunPaths(run_dir)
    if subcommand == "fit":
        csv_logger: Logger = ResumableCSVLogger(save_dir=str(run_dir), name="", version="")
    else:  # an evaluation's log is its own
        log_dir = paths.evaluation_log(evaluation) if evaluation else paths.evaluation(subcommand)
        csv_logger = CSVLogger(save_dir=str(log_dir.parent), name="", version=log_dir.name)
    loggers: list[Logger] = [csv_logger]
    mode = wandb_mode()
    if mode != "disabled":
        fit = subcommand == "fit"
        loggers.append(wandb_logger(
            run_dir, identity=identity, project=opts.wandb_project or os.environ.get("WANDB_PROJECT") or "attnlab",
            mode=mode, log_model=opts.log_model if fit else False, best_of=(opts.monitor, opts.mode) if fit else None))
    return loggers


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).parent)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _scalars(metrics: dict[str, Any]) -> dict[str, float]:
    out = {}
    for k, v in metrics.items():
        if isinstance(v, torch.Tensor) and v.numel() == 1:
            out[k] = float(v)
        elif isinstance(v, (int, float)):
            out[k] = float(v)
    return out


def relative_checkpoint(run_dir: Path, ckpt_path: str | os.PathLike[str] | None) -> str | None:
    """A checkpoint path as an evaluation records it: relative to the run directory when it lies inside."""
    if not ckpt_path:
        return None
    path = Path(ckpt_path).resolve()
    try:
        return str(path.relative_to(Path(run_dir).resolve()))
    except ValueError:
        return str(path)


class RunSummary(L.Callback):
    """Writes summary.json: the fit's status, final and best metrics, parameters, wall time, tokens/s,
    seed and commit, and each evaluation of the run as a record of its own (``Summary.evaluations``).

    A ``test`` / ``validate`` of a fitted run adds its record and leaves the fit's fields alone (its
    seed, metrics, status and W&B id stay the fit's). ``--run.test_after_fit`` is part of the fit: its
    ``test/`` metrics are also the fit's. A ``--trainer.fast_dev_run`` fit ends as ``smoke``.

    Args:
        run_dir: the run directory.
        seed: this command's seed.
        subcommand: fit / validate / test / predict.
        evaluation: the id of this command's evaluation (``rundir.evaluation_id``), for test / validate.
        options: the evaluation's flat ``decode.*`` / ``data.*`` settings.
        checkpoint: the checkpoint it evaluates (:func:`relative_checkpoint`).
    """

    def __init__(self, *, run_dir: Path, seed: int | None, subcommand: str, evaluation: str | None = None,
                 options: dict[str, Any] | None = None, checkpoint: str | None = None) -> None:
        self.run_dir, self.seed, self.subcommand = run_dir, seed, subcommand
        self.evaluation, self.options, self.checkpoint = evaluation, dict(options or {}), checkpoint
        self.t0 = time.time()
        self.train_time = 0.0
        self.started = False  # a loop began: before that, bad input (e.g. data) leaves no run behind

    def _update(self, trainer: L.Trainer, pl_module: L.LightningModule, **fields: Any) -> None:
        if not trainer.is_global_zero:
            return
        summary = read_summary(self.run_dir)
        if fields.get("status") is Status.RUNNING:  # a resumed run: the previous stop is history
            summary.error = summary.exit_code = summary.resume_hint = None
        summary.metrics = {**summary.metrics, **_scalars(trainer.callback_metrics)}
        summary.run_dir, summary.seed, summary.git_commit = str(self.run_dir), self.seed, git_commit()
        summary.parameters = sum(p.numel() for p in pl_module.parameters() if p.requires_grad)
        summary.model = type(pl_module).__name__
        summary.environment = environment(trainer)
        summary.global_step = max(int(trainer.global_step), summary.global_step)
        summary.wandb_run_id = wandb_run_id(trainer) or summary.wandb_run_id
        for key, value in fields.items():
            setattr(summary, key, value)
        ckpt = trainer.checkpoint_callback
        if ckpt is not None and getattr(ckpt, "best_model_score", None) is not None:
            summary.best = {"monitor": ckpt.monitor, "score": float(ckpt.best_model_score),
                            "checkpoint": ckpt.best_model_path}
        write_summary(self.run_dir, summary)

    def _record(self, trainer: L.Trainer, pl_module: L.LightningModule, *, subcommand: str, split: str) -> None:
        """Write this evaluation's record; a run directory with no fit of its own (a checkpoint from
        elsewhere) also gets the summary fields, as the only thing it holds."""
        if not trainer.is_global_zero:
            return
        if self.subcommand == "fit" or read_summary(self.run_dir).status is None:
            self._update(trainer, pl_module, status=read_summary(self.run_dir).status or Status.FINISHED)
        in_fit = self.subcommand == "fit"
        checkpoint = relative_checkpoint(self.run_dir, trainer.ckpt_path) if in_fit else self.checkpoint
        key = self.evaluation or evaluation_id(subcommand, self.options, checkpoint)
        metrics = {k: v for k, v in _scalars(trainer.callback_metrics).items() if k.startswith(f"{split}/")}
        record_evaluation(self.run_dir, key, Evaluation(
            subcommand=subcommand, options=self.options, checkpoint=checkpoint, metrics=metrics, ended=time.time(),
            seed=self.seed, wandb_run_id=wandb_run_id(trainer), in_fit=in_fit, git_commit=git_commit()))

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.t0, self.started = time.time(), True
        self._update(trainer, pl_module, status=Status.RUNNING)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.train_time = time.time() - self.t0

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        wall = time.time() - self.t0
        tokens = getattr(pl_module, "tokens_seen", 0)
        diverged = getattr(pl_module, "diverged_at", None)
        status = Status.DIVERGED if diverged is not None else Status.SMOKE if trainer.fast_dev_run else Status.FINISHED
        self._update(
            trainer, pl_module, status=status, diverged_at=diverged,
            wall_time_s=wall, tokens_seen=tokens, tokens_per_s=tokens / max(wall, 1e-9),
        )

    def on_test_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.started = True

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.started = True

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._record(trainer, pl_module, subcommand="test", split="test")

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.subcommand == "validate":
            self._record(trainer, pl_module, subcommand="validate", split="val")

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        if is_preemption(exception):
            self._update(trainer, pl_module, status=Status.PREEMPTED, exit_code=preemption_exit_code(exception),
                         resume_hint="--ckpt_path last")
            return
        if not self.started and user_error_line(exception) is not None:
            return  # refused input (the CLI prints its one line): nothing was run, nothing to record
        status = Status.INTERRUPTED if isinstance(exception, KeyboardInterrupt) else Status.FAILED
        self._update(trainer, pl_module, status=status, error=f"{type(exception).__name__}: {exception}")
