"""What a command records in its run directory (the layout and ``summary.json`` are
:mod:`attnlab_run.rundir`'s): the ``--run.*`` options, the loggers (CSV always, W&B unless disabled)
and the :class:`RunSummary` callback that writes ``summary.json`` and each evaluation's record.
"""

from __future__ import annotations

import csv
import io
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import lightning as L
import torch
from jsonargparse.typing import NonNegativeInt, PositiveInt
from lightning.pytorch.loggers import CSVLogger, Logger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.loggers.logger import rank_zero_experiment

from attnlab_core.atomic import atomic_write
from attnlab_core.errors import user_error_line
from attnlab_core.repo import git
from attnlab_run.environment import environment
from attnlab_run.evaluations import Evaluation, evaluation_id, record_evaluation, write_evaluation
from attnlab_run.preemption import is_preemption, preemption_exit_code
from attnlab_run.rundir import (
    RunPaths,
    Status,
    read_summary,
    relative_checkpoint,
    write_summary,
)
from attnlab_run.wandb_mode import wandb_mode
from attnlab_run.wandb_run import WandbIdentity, wandb_logger, wandb_run_id

log = logging.getLogger(__name__)


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
        restart: start over in a run directory that already holds a run (a crashed one, whose summary
            says running while no process owns it): the old directory is moved aside to
            ``<name>.<status>-<n>`` (``<name>.crashed-1``) first (``attnlab_run.ownership``).
        test_after_fit: after a finished ``fit``, test the best checkpoint in the same process and
            the same W&B run (for questions answered by a ``test/`` metric).
        figure_drawings: with W&B, the most attention-figure drawings one ``fit`` keeps, at validations
            spread evenly over training (``figures.AttentionFigures``); without W&B one is drawn, at the end.
        log_model: upload the best checkpoint to W&B as a model artifact (Lightning's WandbLogger
            ``log_model``: true = at the end of the fit, ``all`` = every time one is saved); offline, the
            artifact is recorded in the offline run and ``wandb sync`` uploads it.
        branch_from: start this new run (``fit``, a new ``--run.name``) from another run's checkpoint: a run
            directory (its ``checkpoints/last.ckpt``) or a ``.ckpt`` file; weights, optimizer and step counters
            carry over and every other option may differ. ``summary.json`` and the W&B config record the parent
            (``parent``). A resume of the same run (``--ckpt_path last``) may change only the keys
            ``attnlab_run.continuation.EXTENDABLE`` lists.
    """

    root: str = "runs"
    experiment: str | None = None
    name: str | None = None
    monitor: str = "val/loss"
    mode: Literal["min", "max"] = "min"
    wandb_project: str | None = None
    checkpoint_every_n_steps: NonNegativeInt = 0
    test_after_fit: bool = False
    figure_drawings: PositiveInt = 8
    log_model: bool | Literal["all"] = False
    branch_from: str | None = None
    restart: bool = False


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
        out = io.StringIO(newline="")
        writer = csv.DictWriter(out, fieldnames=fieldnames)
        writer.writeheader()
        writer.writerows(rows)
        atomic_write(path, out.getvalue().encode())


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
    """The commit of this code, or None outside a git checkout."""
    return git(["rev-parse", "HEAD"], Path(__file__).parent)


def _scalars(metrics: dict[str, Any]) -> dict[str, float]:
    out = {}
    for k, v in metrics.items():
        if isinstance(v, torch.Tensor) and v.numel() == 1:
            out[k] = float(v)
        elif isinstance(v, (int, float)):
            out[k] = float(v)
    return out


PROGRESS_KEY = "attnlab_progress"  # in a checkpoint: the fit's wall time and tokens seen when it was saved


class RunSummary(L.Callback):
    """Writes the fit's summary.json (status, final and best metrics, parameters, wall time, tokens/s, seed,
    commit) and each evaluation's record of its own.

    Only a ``fit`` writes summary.json. A ``test`` / ``validate`` of a run writes its record, status and
    error in ``<run>/<subcommand>/<id>/evaluation.json`` (:mod:`attnlab_run.evaluations`) however it ends,
    so the fit's files stay byte-identical. ``--run.test_after_fit`` is part of the fit: its record is in
    summary.json and its ``test/`` metrics are also the fit's. A ``--trainer.fast_dev_run`` fit ends as
    ``smoke``.

    Args:
        run_dir: the run directory.
        seed: this command's seed.
        subcommand: fit / validate / test / predict.
        evaluation: the id of this command's evaluation (``evaluations.evaluation_id``), for test / validate.
        options: the evaluation's flat ``decode.*`` / ``data.*`` settings.
        checkpoint: the checkpoint it evaluates (:func:`relative_checkpoint`).
        parent: a branched fit's parent run (``continuation.parent_record``), kept in ``summary.json``.
    """

    def __init__(self, *, run_dir: Path, seed: int | None, subcommand: str, evaluation: str | None = None,
                 options: dict[str, Any] | None = None, checkpoint: str | None = None,
                 parent: dict[str, Any] | None = None) -> None:
        self.run_dir, self.seed, self.subcommand, self.parent = run_dir, seed, subcommand, parent
        self.evaluation, self.options, self.checkpoint = evaluation, dict(options or {}), checkpoint
        self.t0 = time.time()
        self.prior_wall = 0.0  # a resumed fit's wall time before its checkpoint (``on_load_checkpoint``)
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

    def _evaluation_record(self, **fields: Any) -> None:
        """Write this evaluation's own record (``evaluations.write_evaluation``): never the fit's files."""
        if self.evaluation is not None:
            write_evaluation(self.run_dir, self.evaluation, Evaluation(
                subcommand=self.subcommand, options=self.options, checkpoint=self.checkpoint, ended=time.time(),
                seed=self.seed, git_commit=git_commit(), **fields))

    def _record(self, trainer: L.Trainer, pl_module: L.LightningModule, *, subcommand: str, split: str) -> None:
        """Write this evaluation's record: the fit's own test (``--run.test_after_fit``) in summary.json, any
        other in its own folder. A run directory with no summary at all (a checkpoint from elsewhere, evaluated
        under a new name) also gets the summary fields, as the only thing it holds."""
        if not trainer.is_global_zero:
            return
        metrics = {k: v for k, v in _scalars(trainer.callback_metrics).items() if k.startswith(f"{split}/")}
        if self.subcommand != "fit":
            if not RunPaths(self.run_dir).summary.exists():
                self._update(trainer, pl_module, status=Status.FINISHED)
            self._evaluation_record(metrics=metrics, wandb_run_id=wandb_run_id(trainer))
            return
        self._update(trainer, pl_module, status=read_summary(self.run_dir).status or Status.FINISHED)
        checkpoint = relative_checkpoint(self.run_dir, trainer.ckpt_path)
        record_evaluation(self.run_dir, evaluation_id(subcommand, self.options, checkpoint), Evaluation(
            subcommand=subcommand, options=self.options, checkpoint=checkpoint, metrics=metrics, ended=time.time(),
            seed=self.seed, wandb_run_id=wandb_run_id(trainer), in_fit=True, git_commit=git_commit()))

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.t0, self.started = time.time(), True
        self._update(trainer, pl_module, status=Status.RUNNING, **({"parent": self.parent} if self.parent else {}))

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        checkpoint[PROGRESS_KEY] = {"wall_time_s": self.prior_wall + time.time() - self.t0,
                                    "tokens_seen": int(getattr(pl_module, "tokens_seen", 0))}

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        """A resumed fit goes on counting: its wall time and tokens seen up to the checkpoint carry over, so the
        summary's totals (and tokens/s) are the whole fit's, not the last segment's."""
        progress = checkpoint.get(PROGRESS_KEY) or {}
        self.prior_wall = float(progress.get("wall_time_s", 0.0))
        if hasattr(pl_module, "tokens_seen"):
            pl_module.tokens_seen = int(progress.get("tokens_seen", 0))

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        wall = self.prior_wall + time.time() - self.t0
        tokens = getattr(pl_module, "tokens_seen", 0)
        diverged = getattr(pl_module, "diverged_at", None)
        status = Status.DIVERGED if diverged is not None else Status.SMOKE if trainer.fast_dev_run else Status.FINISHED
        warn_if_never_validated(trainer)
        self._update(
            trainer, pl_module, status=status, diverged_at=diverged,
            wall_time_s=wall, tokens_seen=tokens, tokens_per_s=tokens / max(wall, 1e-9),
        )

    def on_test_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.started = True
        if self.subcommand == "test" and trainer.is_global_zero:
            self._evaluation_record(status=Status.RUNNING.value)

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.started = True
        if self.subcommand == "validate" and trainer.is_global_zero:
            self._evaluation_record(status=Status.RUNNING.value)

    def on_predict_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.started = True

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._record(trainer, pl_module, subcommand="test", split="test")

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.subcommand == "validate":
            self._record(trainer, pl_module, subcommand="validate", split="val")

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        if self.subcommand != "fit":  # an evaluation's end is its own record's, never the fit's
            self._evaluation_ended(trainer, exception)
            return
        if is_preemption(exception):
            self._update(trainer, pl_module, status=Status.PREEMPTED, exit_code=preemption_exit_code(exception),
                         resume_hint="--ckpt_path last")
            return
        if not self.started and user_error_line(exception) is not None:
            return  # refused input (the CLI prints its one line): nothing was run, nothing to record
        status = Status.INTERRUPTED if isinstance(exception, KeyboardInterrupt) else Status.FAILED
        self._update(trainer, pl_module, status=status, error=f"{type(exception).__name__}: {exception}")

    def _evaluation_ended(self, trainer: L.Trainer, exception: BaseException) -> None:
        """An evaluation that stopped: its record says how (refused input before it started records nothing)."""
        if not trainer.is_global_zero or (not self.started and user_error_line(exception) is not None):
            return
        status = (Status.PREEMPTED if is_preemption(exception) else
                  Status.INTERRUPTED if isinstance(exception, KeyboardInterrupt) else Status.FAILED)
        self._evaluation_record(status=status.value, error=f"{type(exception).__name__}: {exception}")


def warn_if_never_validated(trainer: L.Trainer) -> None:
    """One line where a fit ended before its first validation: it still finished, but has no ``val/*`` metrics
    and no best checkpoint (Lightning's own hint there, that the monitored metric was never logged, reads as a
    bug in the model)."""
    if trainer.fast_dev_run or any(k.startswith("val/") for k in trainer.callback_metrics):
        return
    log.warning("no validation ran: the fit stopped at step %d, before its first validation "
                "(--trainer.val_check_interval, --trainer.check_val_every_n_epoch), so it has no val/* metrics "
                "and no best checkpoint", trainer.global_step)
