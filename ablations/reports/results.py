"""Collect runs into records the report reads: from local run directories (the run-directory
contract) or, for online sweeps, from the W&B API with the same keys.

A record's ``params`` are flat dotted CLI paths without ``init_args`` (``model.norm``,
``data.test_max_len``, ``seed_everything``): the keys the sweep files, the W&B config
(``RunConfigSaver``) and the report columns share.

A run's ``metrics`` are its fit's, plus at most one evaluation of each kind (``test``, ``validate``)
from the run's finished evaluations (``attnlab_run.evaluations``; :func:`choose_evaluations`): a report
never mixes the numbers of two evaluations, and ``RunRecord.evaluations`` names the ones it read; one that
failed or stopped is a note (``RunRecord.notes``), never the run's status.
"""

from __future__ import annotations

import csv
import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import yaml

from ablations.catalog.questions import Arm, ArmStats
from ablations.verdicts.stats import Stat
from ablations.verdicts.stats import stat as seed_stat
from attnlab_core.flatkeys import flat_key, flat_options
from attnlab_run.evaluations import evaluation_notes, evaluation_records, finished_evaluations
from attnlab_run.rundir import Status
from lit_models.moved import current_paths

log = logging.getLogger(__name__)

EvaluationChoice = Union[str, Mapping[str, Any], None]
"""Which evaluation of a run to read: its id (``test-1a2b3c4d``), the options it must have had
(``{"decode.strategy": "beam"}``), or None: the latest with the run's own decode settings."""
SPLITS = {"test": "test/", "validate": "val/"}  # an evaluation's kind -> the prefix of its metrics
INFO_KEYS = ("parameters", "global_step", "tokens_seen", "wall_time_s", "environment", "git_commit")
STATUSES = tuple(status.value for status in Status)  # the run directory's status enum


@dataclass
class RunRecord:
    """One run as the report sees it.

    Args:
        experiment: group name (= sweep name = question name).
        name: run name (the trial name for sweep runs).
        status: finished / diverged / failed / interrupted / running.
        params: flat config (see module docstring).
        metrics: final scalar metrics (summary.json ``metrics`` or the W&B summary).
        history: rows of metrics.csv (``step`` plus logged keys), or the W&B history.
        figures: attention figure PNGs of the run.
        run_dir: where the run lives (None for W&B-only records).
        info: summary.json's bookkeeping: ``parameters``, ``global_step``, ``tokens_seen``,
            ``wall_time_s``, ``git_commit`` and the ``environment`` record (``attnlab_run.environment``).
        evaluations: kind (``test`` / ``validate``) -> id of the evaluation whose metrics ``metrics`` holds.
        notes: the run's evaluations that failed or stopped (``attnlab_run.evaluations.evaluation_notes``):
            shown beside the run, never its status.
    """

    experiment: str
    name: str
    status: str
    params: dict[str, Any]
    metrics: dict[str, float]
    history: list[dict[str, float]] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    run_dir: Path | None = None
    info: dict[str, Any] = field(default_factory=dict)
    evaluations: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def seed(self) -> Any:
        return self.params.get("seed_everything")

    def arm(self, axes: Iterable[str]) -> Arm:
        """The values of ``axes`` (CLI paths, with or without ``init_args``) for this run."""
        return tuple(self.params.get(flat_key(a)) for a in axes)

    def curve(self, key: str) -> list[tuple[int, float]]:
        """(step, value) of ``key`` over training, finite values only."""
        return [(int(r["step"]), r[key]) for r in self.history if key in r and "step" in r and math.isfinite(r[key])]


def _floats(metrics: Mapping[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def read_history(path: Path) -> list[dict[str, float]]:
    """metrics.csv -> rows of the non-empty numeric cells (Lightning's CSVLogger writes sparse rows)."""
    if not path.is_file():
        return []
    rows = []
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            parsed = {}
            for key, cell in row.items():
                try:
                    parsed[key] = float(cell)
                except (TypeError, ValueError):
                    continue
            rows.append(parsed)
    return rows


def read_mapping(path: Path) -> dict[str, Any]:
    """A run file (``.json``, else YAML) as a dict; {} when it is absent, unreadable or not a mapping."""
    try:
        data = json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
    except (OSError, ValueError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


UNREADABLE = "unreadable"
"""The status a report gives a run whose summary.json exists but is no JSON mapping (it counts as no result)."""


def _status(summary_status: str | None, trial_status: str | None) -> str:
    """The runner's verdict (exit code and summary together) wins; else the summary's; else failed."""
    if trial_status in ("finished", "diverged", "failed", "interrupted", "preempted"):
        return trial_status
    return summary_status if summary_status in STATUSES else "failed"


def load_run(run_dir: Path, *, evaluation: EvaluationChoice = None) -> RunRecord | None:
    """A record from ``run_dir`` (None if it holds none of summary.json, config.yaml, trial.json),
    with the metrics of the evaluations ``evaluation`` chooses (:func:`choose_evaluations`)."""
    summary, config, trial = (read_mapping(run_dir / f) for f in ("summary.json", "config.yaml", "trial.json"))
    if not (summary or config or trial):
        return None
    params = {flat_key(k): v for k, v in (trial.get("params") or {}).items()}
    params = current_paths({**params, **flat_options(config)})  # a run saved before lit_models' modules moved
    unreadable = (run_dir / "summary.json").exists() and not summary  # truncated, binary, a list: not "finished"
    status = UNREADABLE if unreadable else _status(summary.get("status"), trial.get("status"))
    records = {} if unreadable else evaluation_records(run_dir)
    evaluations = finished_evaluations(records)
    chosen = choose_evaluations(evaluations, params, evaluation)
    return RunRecord(
        experiment=run_dir.parent.name, name=run_dir.name, status=status, params=params,
        metrics=with_evaluations(_floats(summary.get("metrics", {})), {k: evaluations[v] for k, v in chosen.items()}),
        history=read_history(run_dir / "metrics.csv"),
        figures=sorted((run_dir / "figures").glob("*.png")), run_dir=run_dir,
        info={k: summary[k] for k in INFO_KEYS if k in summary} | _trial_times(run_dir, trial), evaluations=chosen,
        notes=evaluation_notes(records),
    )


def choose_evaluations(evaluations: Mapping[str, Mapping[str, Any]], params: Mapping[str, Any],
                       choice: EvaluationChoice = None) -> dict[str, str]:
    """Kind (``test`` / ``validate``) -> the id of the one evaluation of that kind a report reads.

    ``choice`` an id: that evaluation alone. A mapping of options: of each kind, the latest evaluation
    that had those options. None: of each kind, the run's only evaluation, or else the latest whose
    ``decode.*`` settings and ``data.test_domain`` are the run's own (the question's; its sweep sets them),
    so an out-of-domain test (``ablations.reports.domains``) never stands for the run's test; none if none has.
    """
    if isinstance(choice, str):
        return {str(evaluations[choice].get("subcommand")): choice} if choice in evaluations else {}
    wanted = dict(choice) if choice is not None else {k: v for k, v in params.items() if _selects(k)}
    out: dict[str, str] = {}
    for kind in SPLITS:
        mine = {k: e for k, e in evaluations.items() if e.get("subcommand") == kind}
        if choice is None and len(mine) == 1:
            out[kind] = next(iter(mine))
            continue
        fits = [(float(e.get("ended") or 0.0), k) for k, e in mine.items()
                if all((e.get("options") or {}).get(o) == v for o, v in wanted.items())]
        if fits:
            out[kind] = max(fits)[1]
    return out


def _selects(option: str) -> bool:
    """Options an evaluation must share with its run to be the run's own: decoding and the test domain."""
    return option.startswith("decode.") or option == "data.test_domain"


def with_evaluations(metrics: Mapping[str, float], chosen: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """The fit's metrics with each chosen evaluation's in place of that kind's (``test/`` or ``val/``)."""
    out = dict(metrics)
    for kind, evaluation in chosen.items():
        out = {k: v for k, v in out.items() if not k.startswith(SPLITS[kind])}
        out.update(_floats(evaluation.get("metrics") or {}))
    return out


def _trial_times(run_dir: Path, trial: dict[str, Any]) -> dict[str, float]:
    """The runner's ``trial_wall_s`` and ``trial_finished`` (epoch seconds; trial.json's modification time
    when it predates the ``finished`` field), or nothing when the run has no runner record."""
    try:
        finished = float(trial.get("finished") or (run_dir / "trial.json").stat().st_mtime)
        return {"trial_wall_s": float(trial["wall_s"]), "trial_finished": finished}
    except (OSError, KeyError, TypeError, ValueError):
        return {}


def load_experiment(exp_dir: Path, *, evaluation: EvaluationChoice = None) -> list[RunRecord]:
    """Every run under ``<root>/<experiment>/``, each with the evaluation ``evaluation`` chooses."""
    runs = (load_run(d, evaluation=evaluation) for d in sorted(exp_dir.iterdir()) if d.is_dir() and _is_run_dir(d))
    return [r for r in runs if r is not None]


def _is_run_dir(path: Path) -> bool:
    return any((path / f).is_file() for f in ("summary.json", "config.yaml", "trial.json"))


def experiment_dirs(root: Path) -> dict[str, Path]:
    """Experiment name -> directory: ``root``'s subdirectories holding runs, or ``root`` itself when it
    is one experiment (its subdirectories are runs)."""
    if not root.is_dir():
        return {}
    subdirs = [d for d in sorted(root.iterdir()) if d.is_dir()]
    if any(_is_run_dir(d) for d in subdirs):
        return {root.name: root}
    return {d.name: d for d in subdirs if any(_is_run_dir(r) for r in d.iterdir() if r.is_dir())}


def stat(values: list[float]) -> Stat:
    """Mean and sample std (0 for one value) of the finite values."""
    return seed_stat(values)


def group_arms(runs: Iterable[RunRecord], axes: tuple[str, ...],
               baseline_of: Callable[[Mapping[str, Any]], str | None] | None = None) -> dict[Arm, list[RunRecord]]:
    """Runs by arm, arms in first-seen order (the sweep's order for runner-made runs). ``baseline_of`` (a question's
    ``Question.baseline_of``): a run it names a baseline for is the arm ``(label,)``, not its axes' values."""
    arms: dict[Arm, list[RunRecord]] = {}
    for run in runs:
        label = baseline_of(run.params) if baseline_of is not None else None
        arms.setdefault((label,) if label is not None else run.arm(axes), []).append(run)
    return arms


def _seed_key(run: RunRecord) -> Any:
    """What pairs runs of two arms: the seed (the run name when a run has none)."""
    return run.seed if run.seed is not None else run.name


def arm_stats(arms: Mapping[Arm, list[RunRecord]],
              values: Callable[[RunRecord], Mapping[str, float]] | None = None) -> ArmStats:
    """arm -> metric -> Stat over the arm's finished runs, keyed by seed (diverged and failed runs excluded).

    ``values`` gives a run's numbers (default: its final metrics; ``ablations.reports.derived.derive`` adds
    curves and length slopes). ``status/diverged`` is the share of the arm's finished-or-diverged
    runs that diverged (1 per diverged seed, 0 per finished one), so a verdict can read divergence.
    """
    out: dict[Arm, dict[str, Stat]] = {}
    for arm, runs in arms.items():
        done = [r for r in runs if r.status == "finished"]
        per_run = [(_seed_key(r), dict(values(r) if values else r.metrics)) for r in done]
        keys = sorted({k for _, m in per_run for k in m})
        out[arm] = {k: seed_stat([m[k] for _, m in per_run if k in m], [s for s, m in per_run if k in m])
                    for k in keys}
        ended = [r for r in runs if r.status in ("finished", "diverged")]
        if ended:
            out[arm]["status/diverged"] = seed_stat([float(r.status == "diverged") for r in ended],
                                                    [_seed_key(r) for r in ended])
    return out


def varying_params(runs: list[RunRecord]) -> tuple[str, ...]:
    """Parameters that differ between runs (seed and run.* excluded): the axes of an ad-hoc experiment."""
    keys = sorted({k for r in runs for k in r.params})
    skip = ("seed_everything", "run.", "config", "trainer.callbacks", "trainer.logger")
    return tuple(k for k in keys if not k.startswith(skip) and len({repr(r.params.get(k)) for r in runs}) > 1)


# ------------------------------------------------------------------- W&B API
def load_wandb_sweep(sweep_path: str) -> tuple[str, list[RunRecord]]:
    """Records of an online sweep (``entity/project/sweep_id``) through ``wandb.Api()``, with the fit runs of
    its question's baseline arms (:func:`_wandb_baselines`).

    Needs network access and credentials, so it is not exercised by the test suite. The W&B
    config holds the flat keys ``RunConfigSaver`` logs; W&B run states map to our statuses
    (crashed/killed -> failed). Figures stay on W&B (the report links none). Only fit runs are read
    (evaluations are runs of their own, ``job_type="eval"``); a ``val/<name>`` summary that keeps its
    best (``{"max": best, "last": v}``) gives its last value, as summary.json's ``metrics`` do.
    """
    import wandb

    api = wandb.Api()
    sweep = api.sweep(sweep_path)
    name = str(sweep.config.get("name") or sweep.id)
    metric = (sweep.config.get("metric") or {}).get("name")
    runs = [run for run in sweep.runs if getattr(run, "job_type", None) in ("fit", None, "")]
    records = [_wandb_record(run, name, metric) for run in runs]
    seen = {getattr(run, "id", None) or run.name for run in runs}
    return name, records + _wandb_baselines(api, sweep_path.rsplit("/", 1)[0], name, metric, seen)


def _wandb_record(run: Any, name: str, metric: str | None) -> RunRecord:
    params = {flat_key(k): v for k, v in dict(run.config).items() if not k.startswith("_")}
    status = {"finished": "finished", "running": "running"}.get(run.state, "failed")
    history = [_wandb_row(row) for row in run.scan_history(keys=[metric, "trainer/global_step"])] if metric else []
    return RunRecord(experiment=name, name=run.name, status=status, params=params,
                     metrics=_floats(_last_values(dict(run.summary))), history=history)


def _wandb_baselines(api: Any, project: str, name: str, metric: str | None, seen: set[str]) -> list[RunRecord]:
    """The fit runs of the question's baseline arms (``Question.baselines``): a W&B grid cannot cross configs, so
    they are not the sweep's runs but runs started into its group (``--run.experiment=<question>``, as the
    question's sweep file says); a run of the group counts when ``Question.baseline_of`` names its arm."""
    from ablations.catalog.lookup import question_for

    question = question_for(name)
    if question is None or not question.baselines:
        return []
    group = api.runs(project, filters={"group": name, "jobType": "fit"})
    records = [_wandb_record(run, name, metric) for run in group if (getattr(run, "id", None) or run.name) not in seen]
    return [r for r in records if question.baseline_of(r.params) is not None]


def _last_values(summary: Mapping[str, Any]) -> dict[str, Any]:
    """A W&B summary with each aggregated value (``{"max": best, "last": v}``) as its last value."""
    return {k: v.get("last") if isinstance(v, Mapping) and "last" in v else v for k, v in summary.items()}


def _wandb_row(row: Mapping[str, Any]) -> dict[str, float]:
    """A W&B history row with Lightning's ``trainer/global_step`` as ``step``."""
    out = {k: float(v) for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if "trainer/global_step" in out:
        out["step"] = out["trainer/global_step"]
    return out
