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
from lightning.pytorch.loggers import CSVLogger, Logger, WandbLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.loggers.logger import rank_zero_experiment
from lightning.pytorch.utilities import rank_zero_only

from attnlab_core.errors import UsageError, user_error_line
from lit_models.environment import environment
from lit_models.faults import is_preemption, preemption_exit_code
from lit_models.rundir import DONE, Status, check_name, read_summary, run_dir_in, safe_name, write_summary
from lit_models.wandb_mode import wandb_mode

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


@dataclass(frozen=True)
class WandbIdentity:
    """How a run shows on W&B dashboards: grouped by question, typed by subcommand, tagged by arm.

    Args:
        group: the experiment (= question) name.
        job_type: fit | validate | test | predict.
        name: display name (the arm and seed, e.g. ``positions=rope,seed=2``).
        tags: the arm's ``axis=value`` and ``seed=N``.
        run_id: the W&B run to continue (a requeued trial, or the fit an evaluation belongs to).
    """

    group: str
    job_type: str
    name: str
    tags: tuple[str, ...] = ()
    run_id: str | None = None


def wandb_identity(run_dir: Path, *, subcommand: str, arm: dict[str, Any], seed: int | None) -> WandbIdentity:
    """The identity of the run in ``run_dir``; an evaluation or a resumed fit continues the W&B run
    recorded in its summary, a sweep trial takes the id the agent exported (``WANDB_RUN_ID``)."""
    tags = tuple(f"{key}={value}" for key, value in arm.items()) + ((f"seed={seed}",) if seed is not None else ())
    run_id = read_summary(run_dir).wandb_run_id or os.environ.get("WANDB_RUN_ID") or None
    return WandbIdentity(group=run_dir.parent.name, job_type=subcommand, name=",".join(tags) if arm else run_dir.name,
                         tags=tags, run_id=run_id)


class QuietWandbLogger(WandbLogger):
    """Lightning's WandbLogger minus the ``anonymous`` init argument that wandb now warns about, and
    with the run directory created before ``wandb.init`` looks for its git root there."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._wandb_init.pop("anonymous", None)

    @property
    def experiment(self) -> Any:
        """As Lightning's, but the run directory exists first: wandb looks for the git root from it
        (and warns "git root ... does not exist" otherwise)."""
        if self._experiment is None and self._save_dir and rank_zero_only.rank == 0:
            Path(self._save_dir).mkdir(parents=True, exist_ok=True)
        return super().experiment


def wandb_run_id(trainer: L.Trainer) -> str | None:
    """The id of the trainer's W&B run, if it has one."""
    return next((str(lg.version) for lg in trainer.loggers if isinstance(lg, WandbLogger) and lg.version), None)


def build_loggers(run_dir: Path, opts: RunOptions, *, identity: WandbIdentity) -> list[Logger]:
    """CSV always; W&B unless WANDB_MODE=disabled (online or offline as :func:`wandb_mode` decides).

    ``fit`` logs to ``<run>/metrics.csv``; evaluating an existing run (test / validate / predict)
    logs to ``<run>/<subcommand>/metrics.csv`` so the training log is never overwritten, and adds
    its metrics to the fit's W&B run (resumed by id).
    """
    subcommand = identity.job_type
    version = "" if subcommand == "fit" else subcommand
    csv_logger = ResumableCSVLogger if subcommand == "fit" else CSVLogger  # an evaluation's log is its own
    loggers: list[Logger] = [csv_logger(save_dir=str(run_dir), name="", version=version)]
    mode = wandb_mode()
    if mode != "disabled":
        loggers.append(QuietWandbLogger(
            save_dir=str(run_dir), project=opts.wandb_project or os.environ.get("WANDB_PROJECT") or "attnlab",
            group=identity.group, job_type=identity.job_type,
            name=identity.name, tags=list(identity.tags), id=identity.run_id, resume="allow",
            offline=mode == "offline", mode=mode))  # explicit: wandb's settings may predate Lightning's env var
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


class RunSummary(L.Callback):
    """Writes summary.json: status, final and best metrics, parameters, wall time, tokens/s, seed, commit."""

    def __init__(self, *, run_dir: Path, seed: int | None, subcommand: str) -> None:
        self.run_dir, self.seed, self.subcommand = run_dir, seed, subcommand
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

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.t0, self.started = time.time(), True
        self._update(trainer, pl_module, status=Status.RUNNING)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.train_time = time.time() - self.t0

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        wall = time.time() - self.t0
        tokens = getattr(pl_module, "tokens_seen", 0)
        diverged = getattr(pl_module, "diverged_at", None)
        self._update(
            trainer, pl_module, status=Status.DIVERGED if diverged is not None else Status.FINISHED,
            diverged_at=diverged,
            wall_time_s=wall, tokens_seen=tokens, tokens_per_s=tokens / max(wall, 1e-9),
        )

    def on_test_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.started = True

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.started = True

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._update(trainer, pl_module, status=read_summary(self.run_dir).status or Status.FINISHED)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.subcommand == "validate":
            self._update(trainer, pl_module, status=read_summary(self.run_dir).status or Status.FINISHED)

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        if is_preemption(exception):
            self._update(trainer, pl_module, status=Status.PREEMPTED, exit_code=preemption_exit_code(exception),
                         resume_hint="--ckpt_path last")
            return
        if not self.started and user_error_line(exception) is not None:
            return  # refused input (the CLI prints its one line): nothing was run, nothing to record
        status = Status.INTERRUPTED if isinstance(exception, KeyboardInterrupt) else Status.FAILED
        self._update(trainer, pl_module, status=status, error=f"{type(exception).__name__}: {exception}")
