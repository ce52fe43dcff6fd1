"""The run directory, owned here: ``<root>/<experiment>/<run_name>/`` with its paths, a typed
``summary.json`` (:class:`Summary`, status as :class:`Status`) and its atomic read/write.

The CLI writes it, the sweep runner and the report read it; nobody else parses these files.

    <run>/config.yaml        the full resolved config of the fit
    <run>/metrics.csv        the training log (CSV logger)
    <run>/summary.json       status, final and best metrics, parameters, wall time, seed, commit, W&B id
    <run>/checkpoints/       best.ckpt, last.ckpt
    <run>/figures/           attention maps, caption overlays
    <run>/<subcommand>/<id>/ one evaluation of the run (test / validate): its config and log, id as in
                             summary.json's ``evaluations`` (:func:`evaluation_id`)
    <run>/predict/           predictions of the run
    <run>/trial.json         the sweep runner's record of the trial (command, exit code, status)
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any

from attnlab_core.errors import UsageError


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
    evaluations: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> Evaluation.to_dict()
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
    """Atomically (write + rename) replace summary.json."""
    paths = RunPaths(Path(run_dir))
    paths.run.mkdir(parents=True, exist_ok=True)
    tmp = paths.summary.with_name("summary.json.tmp")
    tmp.write_text(json.dumps(summary.to_dict(), indent=2, sort_keys=True))
    os.replace(tmp, paths.summary)


@dataclass
class Evaluation:
    """One ``test`` / ``validate`` of a run, kept apart from the fit and from every other evaluation
    (``Summary.evaluations[id]``), so that a report reads exactly one of them.

    Args:
        subcommand: test or validate.
        options: what decides the numbers: the flat ``decode.*`` and ``data.*`` settings (CLI paths).
        checkpoint: the checkpoint evaluated, relative to the run directory when it lies inside it.
        metrics: its scalar metrics (``test/...`` or ``val/...``).
        ended: when it finished (epoch seconds); the latest of several evaluations wins a tie.
        seed: the evaluation's own seed (sampled decoding); the fit's stays in ``Summary.seed``.
        wandb_run_id: its own W&B run (the fit's run for ``--run.test_after_fit``).
        in_fit: run by the fit itself (``--run.test_after_fit``); its metrics are also the fit's.
        git_commit: the code that evaluated.
    """

    subcommand: str
    options: dict[str, Any]
    checkpoint: str | None
    metrics: dict[str, float] = field(default_factory=dict)
    ended: float | None = None
    seed: int | None = None
    wandb_run_id: str | None = None
    in_fit: bool = False
    git_commit: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Evaluation:
        known = {f.name for f in fields(cls)}
        out = cls(**{k: v for k, v in data.items() if k in known})
        out.metrics = {k: float(v) for k, v in (out.metrics or {}).items() if isinstance(v, (int, float))}
        return out

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def evaluation_id(subcommand: str, options: dict[str, Any], checkpoint: str | None) -> str:
    """A short, stable id of what an evaluation evaluated (``test-1a2b3c4d``): the same command with
    the same options and checkpoint replaces its earlier record; any other option makes a new one."""
    import hashlib

    key = json.dumps({"options": options, "checkpoint": checkpoint}, sort_keys=True, default=str)
    return f"{subcommand}-{hashlib.sha1(key.encode()).hexdigest()[:8]}"


def evaluations(summary: Summary) -> dict[str, Evaluation]:
    """The run's evaluations by id, oldest first."""
    found = {k: Evaluation.from_dict(v) for k, v in summary.evaluations.items()}
    return dict(sorted(found.items(), key=lambda item: item[1].ended or 0.0))


def record_evaluation(run_dir: Path, evaluation_key: str, evaluation: Evaluation) -> None:
    """Add (or replace) one evaluation in summary.json; the fit's own fields are left as they are."""
    summary = read_summary(run_dir)
    summary.evaluations = {**summary.evaluations, evaluation_key: evaluation.to_dict()}
    write_summary(run_dir, summary)
