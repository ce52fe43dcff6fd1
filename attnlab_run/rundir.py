"""The run directory, owned here (the one module for it): ``<root>/<experiment>/<run_name>/`` with its
paths, a typed ``summary.json`` (:class:`Summary`, status as :class:`Status`) and its atomic read/write,
and which directory a command uses (:func:`resolve_run_dir`: named, fresh, the checkpoint's own, or
inherited by DDP ranks > 0; a preempted fit resumes, a finished one is not overwritten).

The CLI writes it (through :mod:`attnlab_run.recording`), the sweep runner and the report read it; nobody
else parses these files. Nothing here imports Lightning or torch.

    <run>/config.yaml        the full resolved config of the fit
    <run>/metrics.csv        the training log (CSV logger)
    <run>/summary.json       status, final and best metrics, parameters, wall time, seed, commit, W&B id
    <run>/checkpoints/       best.ckpt, last.ckpt
    <run>/figures/           attention maps, caption overlays
    <run>/<subcommand>/<id>/ one evaluation of the run (test / validate): its config, log and record
                             ``evaluation.json`` (:mod:`attnlab_run.evaluations`: the records and their ids)
    <run>/predict/           predictions of the run
    <run>/trial.json         the sweep runner's record of the trial (command, exit code, status)
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from attnlab_core.atomic import atomic_write
from attnlab_core.errors import UsageError
from attnlab_run.inputs import creatable_problem
from attnlab_run.launch import RESUME_ENV, RUN_DIR_ENV, inherited_run_dir, launch_rank, launcher_run_name

log = logging.getLogger(__name__)


class Status(str, Enum):
    """Where a run stands; the string values are what summary.json and the W&B summary hold."""

    RUNNING = "running"
    FINISHED = "finished"
    DIVERGED = "diverged"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    PREEMPTED = "preempted"
    SMOKE = "smoke"  # a --trainer.fast_dev_run check: proves the run starts, never blocks a real fit

    @classmethod
    def parse(cls, value: Any) -> Status | None:
        """The Status of a stored string, None when missing or unknown."""
        try:
            return cls(value) if value is not None else None
        except ValueError:
            return None


DONE = frozenset({Status.FINISHED, Status.DIVERGED})
"""A run in one of these states is complete: a sweep skips it, a new fit refuses to overwrite it."""


NAME_RULE = ("1 to 128 characters from letters, digits and _ . , = + -, starting with a letter, digit or _ "
             "(one folder name: no '/', no '..')")
"""What a run or experiment name may be; every message that refuses a name quotes it."""
_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.,=+-]{0,127}")


def check_name(value: str, *, option: str) -> str:
    """``value`` when it is a safe single path component (:data:`NAME_RULE`), else a UsageError
    naming ``option``: nothing built from it can leave the folder it is joined to."""
    if not isinstance(value, str) or _SAFE_NAME.fullmatch(value) is None:
        raise UsageError(f"{option}={value!r} is not a valid name: use {NAME_RULE}")
    return value


def safe_name(text: str) -> str:
    """A derived default name (e.g. a config file's stem) made to follow :data:`NAME_RULE`."""
    name = re.sub(r"[^A-Za-z0-9_.,=+-]", "_", text).lstrip(".,=+-")[:128]
    return name or "default"


def inside(root: Path, path: Path) -> Path:
    """``path`` resolved (symlinks followed), refused unless it lies strictly inside ``root`` resolved."""
    base, target = Path(root).resolve(), Path(path).resolve()
    if target == base or not target.is_relative_to(base):
        raise UsageError(f"{path} resolves to {target}, outside the run root {base}; nothing is written there")
    return target


def run_dir_in(root: Path, experiment: str, name: str, *, options: tuple[str, str]) -> Path:
    """``<root>/<experiment>/<name>``, each name checked by :func:`check_name` (``options`` name the
    options they came from) and the result checked to lie inside ``root``."""
    run = Path(root) / check_name(experiment, option=options[0]) / check_name(name, option=options[1])
    inside(root, run)
    return run


@dataclass(frozen=True)
class RunPaths:
    """Every file of the run-directory contract."""

    run: Path

    @property
    def summary(self) -> Path:
        return self.run / "summary.json"

    @property
    def config(self) -> Path:
        return self.run / "config.yaml"

    @property
    def metrics(self) -> Path:
        return self.run / "metrics.csv"

    @property
    def checkpoints(self) -> Path:
        return self.run / "checkpoints"

    def checkpoint(self, which: str) -> Path:
        """``best`` or ``last``."""
        return self.checkpoints / f"{which}.ckpt"

    @property
    def figures(self) -> Path:
        return self.run / "figures"

    @property
    def trial(self) -> Path:
        return self.run / "trial.json"

    @property
    def trial_log(self) -> Path:
        return self.run / "trial.log"

    def evaluation(self, subcommand: str) -> Path:
        """Where ``test`` / ``validate`` / ``predict`` of this run write (one folder per evaluation below it)."""
        return self.run / subcommand

    def evaluation_log(self, evaluation: str) -> Path:
        """The log and config of one evaluation (``test-1a2b3c4d`` -> ``<run>/test/test-1a2b3c4d``)."""
        return self.evaluation(evaluation.partition("-")[0]) / evaluation

    @property
    def predictions(self) -> Path:
        return self.evaluation("predict") / "predictions.jsonl"


@dataclass
class Summary:
    """The content of ``summary.json``. Unknown keys (written by other tools) are kept in ``extra``."""

    status: Status | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    best: dict[str, Any] | None = None
    seed: int | None = None
    git_commit: str | None = None
    parameters: int | None = None
    model: str | None = None
    global_step: int = 0
    wall_time_s: float | None = None
    tokens_seen: int | None = None
    tokens_per_s: float | None = None
    diverged_at: int | None = None
    error: str | None = None
    exit_code: int | None = None
    resume_hint: str | None = None
    run_dir: str | None = None
    wandb_run_id: str | None = None
    environment: dict[str, Any] | None = None  # attnlab_run.environment: hardware, library versions, precision
    evaluations: dict[str, dict[str, Any]] = field(default_factory=dict)  # the fit's own test: id -> Evaluation
    parent: dict[str, Any] | None = None  # a branched run's parent (``--run.branch_from``): run_dir, checkpoint
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Summary:
        known = {f.name for f in fields(cls)} - {"extra"}
        out = cls(**{k: v for k, v in data.items() if k in known},
                  extra={k: v for k, v in data.items() if k not in known})
        out.status = Status.parse(out.status)
        out.metrics = {k: float(v) for k, v in (out.metrics or {}).items() if isinstance(v, (int, float))}
        out.evaluations = {k: v for k, v in (out.evaluations or {}).items() if isinstance(v, dict)}
        return out

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k != "extra" and v is not None}
        if not self.evaluations:
            data.pop("evaluations")
        if self.status is not None:
            data["status"] = self.status.value
        return {**self.extra, **data}

    @property
    def done(self) -> bool:
        return self.status in DONE


def read_summary(run_dir: Path) -> Summary:
    """The run's summary; an empty Summary when there is none or it is unreadable (killed mid-write)."""
    try:
        data = json.loads(RunPaths(Path(run_dir)).summary.read_text())
    except (OSError, ValueError):
        return Summary()
    return Summary.from_dict(data) if isinstance(data, dict) else Summary()


def write_summary(run_dir: Path, summary: Summary) -> None:
    """Atomically (``attnlab_core.atomic``) replace summary.json."""
    atomic_write(RunPaths(Path(run_dir)).summary, json.dumps(summary.to_dict(), indent=2, sort_keys=True).encode())


# The run directory a command uses: chosen once by the launching process, inherited by DDP ranks > 0.

class RunNaming(Protocol):
    """What choosing a run directory reads of the ``--run.*`` options (``recording.RunOptions``)."""

    root: str
    experiment: str | None
    name: str | None


def fresh_run_name() -> str:
    """A timestamped name with a random suffix: two runs started in the same second never collide."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def stable_run_name(opts: RunNaming) -> str | None:
    """``--run.name``, else the W&B run id a sweep agent exports (``WANDB_RUN_ID``: a requeued (preempted)
    trial keeps its id, so it lands in the same run directory and resumes there), else the launcher's job
    (:func:`launcher_run_name`)."""
    launcher = launcher_run_name()
    return opts.name or os.environ.get("WANDB_RUN_ID") or (launcher[0] if launcher else None)


def _name_source(opts: RunNaming) -> str:
    """The option or variable the run name came from (for a message refusing it)."""
    launcher = launcher_run_name()
    return ("--run.name" if opts.name is not None else "WANDB_RUN_ID" if os.environ.get("WANDB_RUN_ID")
            else launcher[1] if launcher else "--run.name")


def resume_preempted(run_dir: Path, *, subcommand: str, ckpt_path: str | None, restart: bool = False) -> str | None:
    """``fit`` of a run directory whose summary says preempted continues from its ``last.ckpt`` (not when
    ``--run.restart`` will move that run aside).

    Decided once, by the launching process; DDP ranks > 0 (which start later, when the summary
    already says "running") inherit the decision through the environment.
    """
    if inherited_run_dir() is not None:
        return os.environ.get(RESUME_ENV) or ckpt_path
    last = run_dir / "checkpoints" / "last.ckpt"
    preempted = read_summary(run_dir).status is Status.PREEMPTED and last.is_file()
    if subcommand == "fit" and not ckpt_path and not restart and preempted:
        log.warning("%s was preempted: continuing from %s", run_dir, last)
        ckpt_path = "last"
    os.environ[RESUME_ENV] = ckpt_path or ""
    return ckpt_path


def set_aside_stale_log(run_dir: Path) -> None:
    """A fresh ``fit`` in a directory that has a log (e.g. a failed attempt retried under the same
    name) keeps that log as ``metrics.prev<N>.csv`` instead of appending to it. Only global rank 0 does it: on
    a shared file system another node's process, later, would move the log rank 0 had just started."""
    log_file = run_dir / "metrics.csv"
    if launch_rank() == 0 and inherited_run_dir() is None and log_file.is_file():  # one process of a launch
        n = 1
        while (run_dir / f"metrics.prev{n}.csv").exists():
            n += 1
        log_file.rename(run_dir / f"metrics.prev{n}.csv")


def default_experiment(configs: Sequence[object]) -> str:
    """The experiment a run lands in without ``--run.experiment``: the first ``--config`` file's stem, else default."""
    return Path(str(configs[0])).stem if configs else "default"


def resolve_run_dir(opts: RunNaming, *, default_experiment: str, ckpt_path: str | None) -> Path:
    """Pick the run directory: the checkpoint's own run, the inherited one, or a fresh one."""
    inherited = inherited_run_dir()
    if inherited is not None:
        return inherited
    experiment = check_name(opts.experiment, option="--run.experiment") if opts.experiment is not None else (
        safe_name(default_experiment))
    name = check_name(opts.name, option="--run.name") if opts.name is not None else stable_run_name(opts)
    options = ("--run.experiment", _name_source(opts))
    if name is None and launch_rank() != 0 and not ckpt_path:
        raise UsageError(f"rank {launch_rank()} of a multi-process launch cannot find rank 0's run directory "
                         f"(no {RUN_DIR_ENV}, --run.name, WANDB_RUN_ID, SLURM_JOB_ID or TORCHELASTIC_RUN_ID): "
                         "pass --run.name")
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
    problem = creatable_problem(run_dir)
    if problem is not None:
        raise UsageError(f"cannot create the run directory {run_dir}: {problem}")


def refuse_finished_run(run_dir: Path, *, subcommand: str, ckpt_path: str | None) -> None:
    """A new ``fit`` must not overwrite a finished run; resuming it (``--ckpt_path``) is fine."""
    status = read_summary(run_dir).status
    if subcommand == "fit" and not ckpt_path and status in DONE:
        raise UsageError(
            f"{run_dir} already holds a {status.value} run; choose another --run.name, "
            "continue it with --ckpt_path last, or start over with --run.restart=true (moves it aside)"
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


def relative_checkpoint(run_dir: Path, ckpt_path: str | os.PathLike[str] | None) -> str | None:
    """A checkpoint path as an evaluation records it: relative to the run directory when it lies inside."""
    if not ckpt_path:
        return None
    path = Path(ckpt_path).resolve()
    try:
        return str(path.relative_to(Path(run_dir).resolve()))
    except ValueError:
        return str(path)
