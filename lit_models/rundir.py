"""The run directory, owned here: ``<root>/<experiment>/<run_name>/`` with its paths, a typed
``summary.json`` (:class:`Summary`, status as :class:`Status`) and its atomic read/write.

The CLI writes it, the sweep runner and the report read it; nobody else parses these files.

    <run>/config.yaml        the full resolved config of the fit
    <run>/metrics.csv        the training log (CSV logger)
    <run>/summary.json       status, final and best metrics, parameters, wall time, seed, commit, W&B id
    <run>/checkpoints/       best.ckpt, last.ckpt
    <run>/figures/           attention maps, caption overlays
    <run>/<subcommand>/      an evaluation of the run (test / validate / predict): its config and log
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
        """Where ``test`` / ``validate`` / ``predict`` of this run write their own log and config."""
        return self.run / subcommand

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
    environment: dict[str, Any] | None = None  # lit_models.environment: hardware, library versions, precision
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Summary:
        known = {f.name for f in fields(cls)} - {"extra"}
        out = cls(**{k: v for k, v in data.items() if k in known},
                  extra={k: v for k, v in data.items() if k not in known})
        out.status = Status.parse(out.status)
        out.metrics = {k: float(v) for k, v in (out.metrics or {}).items() if isinstance(v, (int, float))}
        return out

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k != "extra" and v is not None}
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
