"""Where an evaluation of a run keeps its record: ``<run>/<subcommand>/<id>/evaluation.json``, beside its
config and log, never in the fit's ``summary.json``.

A ``test`` / ``validate`` of a fitted run writes only below its own folder, whatever its end (finished,
failed, preempted, interrupted; a SIGKILL leaves it ``running``): the fit's ``summary.json``,
``config.yaml``, ``metrics.csv``, ``hparams.yaml`` and checkpoints belong to the fit
(``docs/reliability.md``, "A run's record"). The fit's own test (``--run.test_after_fit``) is part of
the fit and stays in ``summary.json``'s ``evaluations``, as do the evaluations of runs recorded before
this layout; :func:`evaluation_records` reads both.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from attnlab_core.atomic import atomic_write
from attnlab_core.errors import UsageError, bounded
from attnlab_run.rundir import RunPaths, Status, read_summary, write_summary


@dataclass
class Evaluation:
    """One ``test`` / ``validate`` of a run, kept apart from the fit and from every other evaluation
    (``Summary.evaluations[id]``), so that a report reads exactly one of them.

    Args:
        subcommand: test or validate.
        options: what decides the numbers: the flat ``decode.*`` and ``data.*`` settings (CLI paths).
        checkpoint: the checkpoint evaluated, relative to the run directory when it lies inside it.
        metrics: its scalar metrics (``test/...`` or ``val/...``).
        ended: when its record was last written (its end; its start while it runs), epoch seconds; the latest of
            several evaluations wins a tie.
        seed: the evaluation's own seed (sampled decoding); the fit's stays in ``Summary.seed``.
        wandb_run_id: its own W&B run (the fit's run for ``--run.test_after_fit``).
        in_fit: run by the fit itself (``--run.test_after_fit``); its metrics are also the fit's.
        git_commit: the code that evaluated.
        status: ``running`` (a SIGKILL leaves it so), ``finished``, ``failed``, ``interrupted`` or ``preempted``;
            only a finished evaluation has numbers a report reads.
        error: why it failed (``Type: message``).
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
    status: str = Status.FINISHED.value
    error: str | None = None

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
    key = json.dumps({"options": options, "checkpoint": checkpoint}, sort_keys=True, default=str)
    return f"{subcommand}-{hashlib.sha1(key.encode()).hexdigest()[:8]}"


def record_evaluation(run_dir: Path, evaluation_key: str, evaluation: Evaluation) -> None:
    """Add (or replace) the fit's own test (``--run.test_after_fit``) in summary.json, written by the fit itself;
    any other evaluation keeps its record in its own folder (:mod:`attnlab_run.evaluations`)."""
    summary = read_summary(run_dir)
    summary.evaluations = {**summary.evaluations, evaluation_key: evaluation.to_dict()}
    write_summary(run_dir, summary)


EVALUATION_FOLDERS = ("test", "validate", "predict")
"""The folders of a run directory that its evaluations own (``RunPaths.evaluation``); the rest is the fit's."""
RECORD_FILE = "evaluation.json"


def record_path(run_dir: Path, evaluation: str) -> Path:
    """``<run>/test/test-1a2b3c4d/evaluation.json`` for ``evaluation`` = ``test-1a2b3c4d``."""
    return RunPaths(Path(run_dir)).evaluation_log(evaluation) / RECORD_FILE


def write_evaluation(run_dir: Path, evaluation: str, record: Evaluation) -> None:
    """Atomically (``attnlab_core.atomic``) replace one evaluation's record; nothing else is touched."""
    atomic_write(record_path(run_dir, evaluation), json.dumps(record.to_dict(), indent=2, sort_keys=True).encode())


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("subcommand") else None


def evaluation_records(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Every evaluation of the run by id, oldest first: the fit's own (in ``summary.json``) and each
    evaluation's own record; of two records with one id (a test that repeats the fit's), the later wins.
    A record without ``status`` (written before evaluations had one) is a finished evaluation."""
    found = {k: {"status": "finished", **v} for k, v in read_summary(run_dir).evaluations.items()}
    for folder in EVALUATION_FOLDERS:
        for path in sorted(Path(run_dir, folder).glob(f"*/{RECORD_FILE}")):
            record = _read(path)
            key = path.parent.name
            if record is not None and float(record.get("ended") or 0.0) >= float(found.get(key, {}).get("ended") or 0):
                found[key] = {"status": "finished", **record}
    return dict(sorted(found.items(), key=lambda item: float(item[1].get("ended") or 0.0)))


def finished_evaluations(records: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The evaluations whose numbers a report may read (a failed or stopped one has none to give)."""
    return {k: v for k, v in records.items() if v.get("status") == "finished"}


def evaluation_notes(records: dict[str, dict[str, Any]]) -> list[str]:
    """One short note per evaluation that did not finish: ``test test-1a2b3c4d failed (RuntimeError: ...)``."""
    notes = []
    for key, record in records.items():
        status = record.get("status")
        if status != "finished":
            error = " ".join(str(record.get("error") or "").split()).replace("|", "/")  # one line, a table cell
            why = f" ({bounded(error, 80)})" if error else ""
            shown = "stopped (no end recorded)" if status == "running" else status
            notes.append(f"{record.get('subcommand')} {key} {shown}{why}")
    return notes


def fit_checkpoint(run_dir: Path, subcommand: str) -> str | None:
    """What ``test`` / ``validate`` / ``predict`` without ``--ckpt_path`` evaluates: of a run that holds a fit,
    its best checkpoint (else its last), said in one line on stderr; a fit without one is refused. None for a
    directory without a fit (a new name: the model as configured, filed under no fit)."""
    paths = RunPaths(Path(run_dir))
    if not paths.summary.is_file():
        return None
    which = next((w for w in ("best", "last") if paths.checkpoint(w).is_file()), None)
    if which is None:
        raise UsageError(f"{run_dir} holds a fit but no checkpoint to {subcommand}; give --ckpt_path (a .ckpt file)")
    print(f"attnlab: {subcommand} of {run_dir}: its checkpoints/{which}.ckpt (give --ckpt_path to choose another)",
          file=sys.stderr)
    return which
