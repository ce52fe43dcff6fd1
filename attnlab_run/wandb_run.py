"""How a run appears on W&B: its identity (group, job type, name, tags), the logger that opens it, and
the summary of its best validation values.

A ``fit`` is one W&B run (``job_type="fit"``), resumed by id after a preemption. Every ``test`` /
``validate`` of it is a W&B run of its own (``job_type="eval"``) in the fit's group, whose config names
the fit run, the checkpoint and the evaluation id. W&B's guide to organising runs describes exactly
this split (https://docs.wandb.ai/models/runs/grouping: a group is a collection of runs with one
purpose; the job type says each run's function, "preprocessing, training, or evaluation"); it also
keeps evaluation away from two W&B limits: an offline run cannot be resumed
(wandb/wandb#2423, #4624), and ``wandb sync`` of several offline folders with one id keeps one of them
(#3841, #5865) -- so an evaluation that resumed the fit's id offline would erase either the fit's
history or the evaluation on sync, and online it would rename and re-type the fit's run.
"""

from __future__ import annotations

import logging
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import lightning as L
from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.utilities import rank_zero_only

from attnlab_run.rundir import read_summary

log = logging.getLogger(__name__)
EVAL_JOB_TYPE = "eval"


@dataclass(frozen=True)
class WandbIdentity:
    """How a run shows on W&B dashboards: grouped by question, typed by what it does, tagged by arm.

    Args:
        group: the experiment (= question) name; an evaluation shares its fit's.
        job_type: ``fit``, ``eval`` (test / validate) or ``predict``.
        name: display name (the arm and seed, e.g. ``positions=rope,seed=2``; an evaluation adds its id).
        tags: the arm's ``axis=value`` and the fit's ``seed=N``.
        run_id: the W&B run to open: a requeued trial's or a preempted fit's id; a fresh id for an evaluation.
        config: extra W&B config: for an evaluation, the fit run, checkpoint and evaluation id it belongs to.
    """

    group: str
    job_type: str
    name: str
    tags: tuple[str, ...] = ()
    run_id: str | None = None
    config: dict[str, Any] = field(default_factory=dict)


def wandb_identity(run_dir: Path, *, subcommand: str, arm: dict[str, Any], seed: int | None,
                   evaluation: str | None = None, checkpoint: str | None = None) -> WandbIdentity:
    """The identity of ``subcommand`` on the run in ``run_dir``.

    ``fit`` continues the W&B run recorded in the summary (a preempted fit) or the id a sweep agent
    exported (``WANDB_RUN_ID``). Any other subcommand opens a new run with a fresh id (so neither the
    agent's id nor the fit's is ever reopened), named and tagged after the fit (the fit's seed, not
    the evaluating command's), with ``eval.*`` config keys pointing at the fit run and checkpoint.
    """
    summary = read_summary(run_dir)
    # the fit's seed names it: an evaluation takes the seed of the fit it evaluates; a fit its own (a resumed fit's
    # command carries the run's seed: continuation.run_seed; a fresh fit's is not a leftover summary's);
    # a run that was not seeded (--seed_everything=false: Lightning's bool) has no seed tag
    fit_seed = summary.seed if subcommand != "fit" and summary.seed is not None else seed
    fit_seed = None if isinstance(fit_seed, bool) else fit_seed
    tags = tuple(f"{key}={value}" for key, value in arm.items())
    tags += (f"seed={fit_seed}",) if fit_seed is not None else ()
    name = ",".join(tags) if arm else run_dir.name
    if subcommand == "fit":
        run_id = summary.wandb_run_id or os.environ.get("WANDB_RUN_ID") or None
        return WandbIdentity(group=run_dir.parent.name, job_type="fit", name=name, tags=tags, run_id=run_id)
    reference = {"eval.fit_run": summary.wandb_run_id, "eval.fit_dir": str(run_dir), "eval.id": evaluation,
                 "eval.checkpoint": checkpoint, "eval.fit_seed": fit_seed}
    return WandbIdentity(group=run_dir.parent.name, job_type=EVAL_JOB_TYPE if subcommand != "predict" else subcommand,
                         name=f"{name} {evaluation or subcommand}", tags=tags, run_id=secrets.token_hex(4),
                         config={k: v for k, v in reference.items() if v is not None})


class QuietWandbLogger(WandbLogger):
    """Lightning's WandbLogger minus the ``anonymous`` init argument that wandb now warns about, with
    the run directory created before ``wandb.init`` looks for its git root there, and (given
    ``best_of``) the best value of each ``val/<name>`` metric kept in the W&B summary.

    W&B's summary keeps each metric's last logged value, a plain number like summary.json's ``metrics``, which
    is what a sweep's ``metric.name``, a dashboard's bars and its runs table read. (A metric defined with
    ``define_metric(name, summary=...)`` would instead hold a dict, ``{"max": best, "last": v}``, which W&B shows
    as ``name.max`` and which no panel or sweep reading ``name`` finds: wandb#2428, #5450.) The best of each
    tracked metric is kept beside it as plain numbers: ``best/<name>`` (the best value) and ``best_step/<name>``
    (the ``trainer/global_step`` of the row that logged it). ``best`` is
    saved in checkpoints by :class:`BestValidation`, so a resumed fit reports the best of the whole run.
    On an offline resume, :class:`HistoryStep` hands it the W&B step the preempted attempt stopped at
    (:meth:`continue_history_at`), and its rows continue from there.

    Args:
        best_of: the monitored metric and its direction (``--run.monitor``, ``--run.mode``); None: W&B's
            default summary (the last value), as for an evaluation.
    """

    def __init__(self, *, best_of: tuple[str, Literal["min", "max"]] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._wandb_init.pop("anonymous", None)
        self._best_of = best_of
        self.best: dict[str, tuple[float, int]] = {}
        self._history_from: int | None = None

    def continue_history_at(self, step: int) -> None:
        """Number this run's next history row ``step`` (W&B's ``_step``), unless the run is past it already."""
        self._history_from = step

    def next_history_step(self) -> int | None:
        """The ``_step`` of the run's next history row (``Run.step``); None where no run is open here, or
        where W&B does not answer (``Run.step`` waits up to 30 s; a checkpoint must not fail for it)."""
        if rank_zero_only.rank != 0 or self._experiment is None:
            return None
        try:
            return int(self.experiment.step)
        except Exception as err:  # noqa: BLE001 - W&B trouble must not lose the checkpoint
            log.warning("W&B did not say its history step (%s): a resume of this checkpoint offline restarts it", err)
            return None

    def _move_history(self) -> None:
        """Before the first row: move the run's step counter to ``_history_from``.

        ``Run.log({}, step=s, commit=False)`` is W&B's public way to say "the next row is step s": a step
        larger than the current one starts a new (still empty) row there, and the next ``log`` without a
        step fills and commits it; rows after it count on from ``s``. An online resume already starts
        after the server's last step (``Run.step`` tells), and a step below it would be dropped, so the
        move happens only forwards.
        """
        step, self._history_from = self._history_from, None
        run = self.experiment  # opens the run if nothing did yet
        current = self.next_history_step()
        if step is not None and current is not None and step > current:
            run.log({}, step=step, commit=False)

    def _goal(self, name: str) -> Literal["min", "max"]:
        assert self._best_of is not None
        return self._best_of[1] if name == self._best_of[0] else metric_goal(name)

    def log_metrics(self, metrics: dict[str, Any], step: int | None = None) -> None:
        tracked_now = {}
        if self._history_from is not None and rank_zero_only.rank == 0:
            self._move_history()
        if self._best_of is not None and rank_zero_only.rank == 0:
            for name, value in metrics.items():
                if not tracked(name, monitor=self._best_of[0]) or not _scalar(value):
                    continue  # media (e.g. val/confusion images) and breakdowns have no best
                tracked_now[name] = float(value)
        super().log_metrics(metrics, step)
        for name, value in tracked_now.items():
            known = self.best.get(name)
            if better(value, known[0] if known else None, goal=self._goal(name)):
                self.best[name] = (value, int(step or 0))
            if name in self.best:
                self.experiment.summary[f"best/{name}"] = self.best[name][0]
                self.experiment.summary[f"best_step/{name}"] = self.best[name][1]

    @property
    def experiment(self) -> Any:
        """As Lightning's, but the run directory exists first: wandb looks for the git root from it
        (and warns "git root ... does not exist" otherwise)."""
        if self._experiment is None and self._save_dir and rank_zero_only.rank == 0:
            Path(self._save_dir).mkdir(parents=True, exist_ok=True)
        return super().experiment


def wandb_logger(run_dir: Path, *, identity: WandbIdentity, project: str, mode: Literal["online", "offline"],
                 log_model: bool | Literal["all"] = False,
                 best_of: tuple[str, Literal["min", "max"]] | None = None) -> QuietWandbLogger:
    """The W&B logger of ``identity``, writing under ``<run>/wandb/``.

    ``log_model`` (a fit) logs the best checkpoint as a model artifact through Lightning's own mechanism; offline,
    the artifact is recorded in the offline run and ``wandb sync`` uploads it with the rest. The mode goes to
    ``wandb.init`` as an argument only: Lightning's ``offline=True`` would set ``WANDB_MODE`` in the environment
    after wandb's settings were read (wandb then warns that "changes to your wandb environment variables will be
    ignored"), and would refuse ``log_model``.
    """
    return QuietWandbLogger(
        save_dir=str(run_dir), project=project, group=identity.group, job_type=identity.job_type,
        name=identity.name, tags=list(identity.tags), id=identity.run_id, resume="allow",
        config=dict(identity.config) or None, log_model=log_model, best_of=best_of, mode=mode,
        settings=_quiet_settings())


def _quiet_settings() -> Any:
    """W&B's ``quiet`` setting: no version banner and no end-of-run history and summary block (the run's numbers
    are in summary.json and on W&B); where an offline run is saved is still printed, and warnings and errors."""
    import wandb

    return wandb.Settings(quiet=True)


def wandb_run_id(trainer: L.Trainer) -> str | None:
    """The id of the trainer's W&B run, if it has one."""
    return next((str(lg.version) for lg in trainer.loggers if isinstance(lg, WandbLogger) and lg.version), None)


MINIMIZED = ("loss", "mse", "mae", "ppl", "perplexity", "error", "wer", "cer", "nll", "gap")
"""Words that make a metric lower-is-better (``val/loss``, ``val/mse``); every other ``val/<name>``
(accuracy, BLEU, exact match, CIDEr-D) is higher-is-better."""


def _scalar(value: Any) -> bool:
    """A number or a one-element tensor (what a best value can be taken of)."""
    return isinstance(value, (int, float)) or (hasattr(value, "numel") and value.numel() == 1)


def tracked(name: str, *, monitor: str) -> bool:
    """Whether the summary keeps the best of ``name``: the monitored metric and every ``val/<name>``
    (not the per-bucket or per-layer ``val/<name>/<part>`` breakdowns, nor probes with no direction)."""
    return name == monitor or (name.startswith("val/") and name.count("/") == 1 and not name.startswith("val/attn_"))


def better(value: float, known: float | None, *, goal: Literal["min", "max"]) -> bool:
    """Whether ``value`` beats ``known`` (None: nothing yet) in direction ``goal``; NaN never does."""
    if value != value:
        return False
    return known is None or (value < known if goal == "min" else value > known)


def metric_goal(name: str) -> Literal["min", "max"]:
    """Whether ``name`` (``val/loss``, ``val/exact_match``) is optimised downwards or upwards."""
    leaf = name.rsplit("/", 1)[-1].lower()
    return "min" if any(word in leaf.split("_") or leaf == word for word in MINIMIZED) else "max"


class BestValidation(L.Callback):
    """Saves the best ``val/<name>`` values :class:`QuietWandbLogger` tracked in each checkpoint and
    hands them back on resume, so the W&B summary's ``best/`` and ``best_step/`` keys cover the whole
    run, its attempts before a preemption included (offline, those lie in another folder)."""

    def __init__(self) -> None:
        self._logger: QuietWandbLogger | None = None
        self._restored: dict[str, tuple[float, int]] = {}

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._logger = next((lg for lg in trainer.loggers if isinstance(lg, QuietWandbLogger)), None)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._logger is not None:  # after the checkpoint's callback states are loaded
            self._logger.best = {**self._restored, **self._logger.best}

    def state_dict(self) -> dict[str, Any]:
        best = self._logger.best if self._logger is not None else self._restored
        return {"best": {k: [v, s] for k, (v, s) in best.items()}}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._restored = {k: (float(v[0]), int(v[1])) for k, v in state_dict.get("best", {}).items()}


class HistoryStep(L.Callback):
    """Carries a fit's W&B history step across a preemption, so that the resumed attempt's rows come
    after the preempted attempt's and ``wandb sync`` of both offline folders uploads one history.

    W&B numbers a run's history rows ``_step`` = 0, 1, 2, ... (one per ``log`` call). An online resume
    starts after the last step the server holds (its reply's ``RunRecord.starting_step``), but an
    offline process cannot ask, and its rows start at 0 again: synced after the first folder, they
    would repeat its step numbers, and W&B replaces or drops rows whose step is not beyond its last
    (wandb/wandb#3841, #5865, #2423, #4624). Each checkpoint therefore stores ``Run.step`` (the step
    of the run's next row, public API), and on a resumed fit :class:`QuietWandbLogger` moves its run
    to that step before its first row. A SIGTERM preemption checkpoints after its last row, so the
    folders' steps never overlap; rows logged after the last checkpoint of a killed (SIGKILL) attempt
    share their step numbers with the resumed rows that replay the same training steps. Evaluations
    (``test``, ``validate``) open runs of their own and are left alone.
    """

    def __init__(self) -> None:
        self._logger: QuietWandbLogger | None = None
        self._fitting = False

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._logger = next((lg for lg in trainer.loggers if isinstance(lg, QuietWandbLogger)), None)
        self._fitting = stage == "fit"

    def state_dict(self) -> dict[str, Any]:
        step = self._logger.next_history_step() if self._logger is not None else None
        return {} if step is None else {"wandb_step": step}  # None: W&B off, another rank, or no run yet

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        step = state_dict.get("wandb_step")
        if self._logger is not None and self._fitting and step:  # setup ran first: Trainer._run
            self._logger.continue_history_at(int(step))
