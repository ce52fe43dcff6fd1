"""What the offline runner reads and shows of its trials: a trial's status and whether it can resume
(from its run directory), its progress line, the sweep's time left and the grid's size."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnlab_run.rundir import RunPaths, Status, read_summary


@dataclass
class Trial:
    """One proposed trial: its parameters, name, run directory and the commands it runs."""

    name: str
    params: dict[str, Any]
    run_dir: Path
    command: list[str]


@dataclass
class Outcome:
    """What became of a trial: status (finished/diverged/failed/skipped-*), exit code, metric, time."""

    trial: Trial
    status: str
    returncode: int | None = None
    metric: float | None = None
    wall_s: float = 0.0
    skipped: bool = False
    summary_metrics: dict[str, float] = field(default_factory=dict)


def progress_line(index: int, total: int | None, outcome: Outcome, metric: str | None,
                  eta_s: float | None = None) -> str:
    """``[3/12] attn_scale=none,seed=1  finished  val/exact_match=0.412  38s  ETA 6 min``"""
    value = "" if outcome.metric is None or metric is None else f"  {metric}={outcome.metric:.4g}"
    rc = f" (exit {outcome.returncode})" if outcome.returncode not in (0, None) else ""
    wall = f"  {outcome.wall_s:.0f}s" if not outcome.skipped else ""
    eta = "" if eta_s is None else f"  ETA {minutes(eta_s)}"
    return f"[{index}/{total or '?'}] {outcome.trial.name}  {outcome.status}{rc}{value}{wall}{eta}"


def minutes(seconds: float) -> str:
    """A duration as people read it: whole minutes from 90 s on, else seconds (every ETA and estimate line)."""
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def time_left(mean_trial_s: float, trials_left: int, jobs: int) -> float:
    """The mean wall time of the trials run so far times the trials left, over the trials run at once."""
    return mean_trial_s * max(0, trials_left) / max(1, jobs)


def eta_seconds(outcomes: list[Outcome], total: int | None, jobs: int) -> float | None:
    """Time left (:func:`time_left`) from the trials run so far; None before the first or for an open total."""
    ran = [o.wall_s for o in outcomes if not o.skipped]
    if total is None or not ran:
        return None
    return time_left(sum(ran) / len(ran), total - len(outcomes), jobs)


def grid_size(sweep: Mapping[str, Any]) -> int | None:
    """Number of grid points (None for random/bayes or non-categorical grids)."""
    if sweep.get("method") != "grid":
        return None
    sizes = [len(s["values"]) if "values" in s else 1 for s in sweep.get("parameters", {}).values()]
    return math.prod(sizes)


def read_json(path: Path) -> dict[str, Any]:
    """A JSON file as a dict ({} if missing or unreadable: a trial killed mid-write)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def trial_status(run_dir: Path, returncode: int | None) -> str:
    """finished / diverged / interrupted / preempted from summary.json; anything else (no summary) is failed.

    A non-zero exit fails a trial whose summary says finished (e.g. its test after the fit failed).
    A preempted trial saved ``last.ckpt`` and is resumed the next time the sweep runs."""
    status = read_summary(run_dir).status
    stopped = (Status.DIVERGED, Status.INTERRUPTED, Status.PREEMPTED)
    if returncode not in (0, None):
        return status.value if status in stopped else Status.FAILED.value
    return status.value if status in (Status.FINISHED, *stopped) else Status.FAILED.value


def resumable(run_dir: Path) -> bool:
    """A trial stopped before its end (preempted, interrupted, or still "running": its sweep was killed)
    that saved ``checkpoints/last.ckpt``: the next invocation continues it instead of starting over."""
    stopped = (Status.PREEMPTED, Status.INTERRUPTED, Status.RUNNING)
    return read_summary(run_dir).status in stopped and RunPaths(run_dir).checkpoint("last").is_file()
