"""Offline sweep execution on W&B's own sweeps engine, with ``wandb agent``'s command rendering.

``sweeps.next_run`` proposes each trial (grid, random or bayes) from the records of the trials
before it; every trial runs as a subprocess with exactly the argument list ``wandb agent``
builds from the sweep's ``command:`` (``${env} ${interpreter} ${program} ... ${args}``, values
rendered ``--key=value`` with ``str()``), followed by the scale overrides and the run-directory
arguments. Everything else a trial needs (its experiment, a test after the fit) is in the sweep's
own command, so a trial here is exactly a ``wandb agent`` trial. Deviations from the agent:
``${interpreter}`` is the Python running this runner (the agent uses the literal ``python`` from
PATH), so trials run in the same environment; and a trial running that interpreter is forked from a
server that has already imported torch, Lightning and the project (``ablations/engine/warm.py``: same argv,
environment, cwd, log and process group; the default on Linux: ``--no-warm`` or ``ATTNLAB_WARM_TRIALS=0`` turn it off).

Each trial lands in ``<root>/<sweep name>/<trial name>/`` (the run-directory contract) plus
``trial.json`` (parameters, command, exit code, status) and ``trial.log`` (its output). Trial
names are derived from the parameters, so a second invocation skips trials whose summary says
finished or diverged, and retries the rest.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablations.catalog.baselines import Baselines, baseline_commands, baseline_specs
from ablations.catalog.lookup import question_for
from ablations.catalog.questions import QUICK_DATA, REPO
from ablations.engine.stackgroups import (
    NOTHING_TO_STACK_WITH,
    REFUSED_EXIT,
    default_stack,
    refusal_reason,
    sweep_refusal,
    units,
)
from ablations.engine.sweepspec import (  # noqa: F401 - the sweep-file API, re-exported for callers of the runner
    SweepError,
    load_sweep,
    proposable_values,
    render_args,
    render_command,
    schema_violations,
    to_python,
    trial_name,
    varied_keys,
)
from ablations.engine.trialproc import (  # noqa: F401 - wait_any re-exported
    install_handlers,
    restore_handlers,
    signal_group,
    stop_process,
    wait_any,
)
from ablations.engine.trialrun import (  # noqa: F401
    Running,
    finish_trial,
    start_group,
    start_trial,
    visible_gpus,
    write_trial_json,
)
from ablations.engine.trialstate import (  # noqa: F401 - re-exported
    Outcome,
    Trial,
    eta_seconds,
    grid_size,
    progress_line,
    read_json,
)
from ablations.engine.warm import warm_wanted
from attnlab_run.rundir import DONE, RunPaths, Status, read_summary

log = logging.getLogger(__name__)

DONE_STATUSES = tuple(s.value for s in DONE)


# ---------------------------------------------------------------- trials
@dataclass
class SweepPlan:
    """Everything fixed for one invocation of a sweep."""

    sweep: dict[str, Any]
    name: str
    root: Path
    scale_args: list[str]
    interpreter: str
    cwd: Path
    env: dict[str, str]
    warm: bool = False  # trials forked from a preloaded server (ablations/engine/warm.py) where their command allows
    baselines: Baselines = field(default_factory=dict)  # the question's baseline arms (ablations.catalog.baselines)
    stack: bool = True  # the fresh seeds of an arm trained as one process where they can (ablations.engine.stackgroups)

    @property
    def metric(self) -> str | None:
        return (self.sweep.get("metric") or {}).get("name")

    def trial(self, params: dict[str, Any]) -> Trial:
        command = render_command(self.sweep, params, interpreter=self.interpreter) + self.scale_args
        return self._trial(trial_name(params, varied_keys(self.sweep)), params, command)

    def baseline_trials(self) -> list[Trial]:
        """Each baseline arm on each of the sweep's seeds (``ablations.catalog.baselines``)."""
        return [self._trial(*spec) for spec in baseline_commands(self.sweep, self.baselines,
                                                                  interpreter=self.interpreter)]

    def _trial(self, name: str, params: dict[str, Any], command: list[str]) -> Trial:
        run_dir = self.root / self.name / name
        command.append(f"--run.root={self.root}")
        if not any(c.startswith("--run.experiment=") for c in command):  # an ad-hoc sweep: its name
            command.append(f"--run.experiment={self.name}")
        command.append(f"--run.name={name}")
        return Trial(name=name, params=params, run_dir=run_dir, command=command)


TRIAL_PROGRESS_EVERY = "50"
"""Steps between two redraws of a runner trial's progress bar (unless TQDM_MINITERS is set already)."""


def make_plan(
    sweep: dict[str, Any], *, root: str | Path, scale: str, threads: int | None, interpreter: str | None = None,
    warm: bool | None = None, stack: bool | None = None,
) -> SweepPlan:
    """Validate ``sweep`` and fix its name, scale overrides, environment and working directory.
    ``warm``: start trials warm (default: on Linux unless ``ATTNLAB_WARM_TRIALS=0``,
    :func:`ablations.engine.warm.warm_wanted`,
    and only when the trials' environment pins one BLAS thread, since the server refuses to fork otherwise);
    ``stack``: train the seeds of an arm stacked where they can be (None: only where a GPU is visible,
    ``ablations.engine.stackgroups.default_stack``)."""
    violations = schema_violations(sweep)
    if violations:
        raise SweepError("sweep config violates the W&B schema: " + "; ".join(violations))
    name = str(sweep["name"])
    question = question_for(name)
    scale_args = [] if scale == "full" else list(question.quick if question else QUICK_DATA)
    from attnlab_run.launch import RUN_DIR_ENV

    # each trial names its own run directory and W&B run (a stale agent id would merge them all)
    env = {k: v for k, v in os.environ.items() if k not in (RUN_DIR_ENV, "WANDB_RUN_ID")}
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    # a trial's progress bar goes to its trial.log, not a terminal: Lightning's bar reads TQDM_MINITERS, and
    # redrawing it at every step cost ~1.3 s of a quick recurrent trial (BENCHMARKS.md, issue #26)
    env.setdefault("TQDM_MINITERS", TRIAL_PROGRESS_EVERY)
    program = Path(str(sweep.get("program", "")))
    cwd = Path.cwd() if program.is_absolute() or (Path.cwd() / program).exists() else REPO
    return SweepPlan(sweep=sweep, name=name, root=Path(root).resolve(), scale_args=scale_args,
                     interpreter=interpreter or sys.executable, cwd=cwd, env=env,
                     warm=_default_warm(env) if warm is None else warm, baselines=baseline_specs(question, scale_args),
                     stack=default_stack() if stack is None else stack)


def _default_warm(env: Mapping[str, str]) -> bool:
    """Warm by default where it can serve: one BLAS thread per trial (quick scale, ``--jobs`` > 1, ``--threads 1``).
    Elsewhere the server would refuse (fork after OpenMP's pool exists is unsafe) and warn on every sweep."""
    return warm_wanted() and env.get("OMP_NUM_THREADS") == "1"


# ---------------------------------------------------------------- the session
def _engine_record(trial: Trial, state: str, metrics: Mapping[str, float] | None = None) -> Any:
    """The SweepRun the engine sees for a trial (config entries are ``{"value": v}`` like W&B's). The metrics go
    in by their alias ``summaryMetrics``: sweeps 0.2.0 (what pip picks where numpy 2 is installed, since 0.3.0
    pins numpy<2) is pydantic-1 code that under pydantic 2 silently drops the field name ``summary_metrics``."""
    from sweeps import SweepRun

    return SweepRun(name=trial.name, state=state, config={k: {"value": v} for k, v in trial.params.items()},
                    summaryMetrics=dict(metrics or {}))


def _done_outcome(trial: Trial, metric: str | None) -> Outcome | None:
    """An Outcome marking the trial skipped when its summary says finished or diverged (and the runner's
    own record, if any, agrees: a fit whose follow-up test failed is run again)."""
    summary = read_summary(trial.run_dir)
    record = read_json(RunPaths(trial.run_dir).trial)
    if not summary.done or (record and Status.parse(record.get("status")) not in DONE):
        return None
    metrics = summary.metrics
    return Outcome(trial=trial, status=f"skipped ({summary.status.value})", metric=metrics.get(metric or ""),
                   skipped=True, summary_metrics=metrics)


class _Session:
    """State of one invocation: the engine's run records, the outcomes and the live trials."""

    def __init__(self, plan: SweepPlan, *, limit: int | None, dry_run: bool, jobs: int,
                 echo: Callable[[str], None]) -> None:
        self.plan, self.limit, self.dry_run, self.jobs, self.echo = plan, limit, dry_run, max(1, jobs), echo
        self.show_eta = echo is print and sys.stdout.isatty()  # an estimate is for a person watching
        self.baselines = plan.baseline_trials()  # run once the engine has no more trials
        grid = grid_size(plan.sweep)
        sizes = [x for x in (limit, None if grid is None else grid + len(self.baselines)) if x is not None]
        self.total = min(sizes) if sizes else None
        self.engine_done = False
        self.runs: list[Any] = []
        self.outcomes: list[Outcome] = []
        self.active: list[Running] = []
        self.gpus = visible_gpus(plan.env) if self.jobs > 1 else []  # --jobs N: each trial on one GPU
        self.units: list[list[Trial]] = []  # drawn trials to start: stacked groups and single trials
        self.alone = sweep_refusal(plan.sweep, stack=plan.stack)  # why no trial is stacked, or None
        self.why: dict[str, str] = {}  # trial name -> why its stacked group was refused
        self.started = 0
        self.skipped_in_a_row = 0
        self.exhausted = False
        self.signum: int | None = None  # a termination signal the sweep received

    def _record(self, outcome: Outcome, state: str) -> None:
        self.runs = [r for r in self.runs if r.name != outcome.trial.name]
        self.runs.append(_engine_record(outcome.trial, state, outcome.summary_metrics))
        self.outcomes.append(outcome)

    def _propose(self) -> Trial | None:
        """The engine's next trial; once it has none, the next baseline trial; None when both are done."""
        from sweeps import next_run

        if not self.engine_done:
            proposal = next_run(self.plan.sweep, self.runs)
            if proposal is not None and self.skipped_in_a_row <= 1000:
                return self.plan.trial({k: to_python(v["value"]) for k, v in proposal.config.items()})
            self.engine_done = True
        return self.baselines.pop(0) if self.baselines else None

    def _skipped(self, trial: Trial) -> bool:
        """Record and show ``trial`` as skipped when it is done already."""
        done = _done_outcome(trial, self.plan.metric)
        if done is not None:
            self.skipped_in_a_row += 1
            self._record(done, "finished")
            self.echo(progress_line(len(self.outcomes), self.total, done, self.plan.metric))
        return done is not None

    def _next_unit(self) -> list[Trial] | None:
        """Trials to start as one process: with stacking, every trial still to run is drawn at once and
        grouped by arm (``stackgroups.units``); else the engine's next proposal. None when none is left."""
        if not self.units and self.alone is None and not self.dry_run:
            drawn: list[Trial] = []
            new = 0  # the limit counts started trials; done ones are skipped in order by fill
            done = lambda trial: _done_outcome(trial, self.plan.metric) is not None  # noqa: E731
            while self.limit is None or self.started + new < self.limit:
                trial = self._propose()
                if trial is None:
                    break
                self.runs.append(_engine_record(trial, "running"))
                drawn.append(trial)
                new += not done(trial)
            self.units = units(drawn, alone=done)
        if self.units:
            return self.units.pop(0)
        trial = self._propose()
        return None if trial is None else [trial]

    def fill(self) -> None:
        """Start trials until ``jobs`` processes run at once, the limit is hit or the engine and the baselines
        are done."""
        while (not self.exhausted and self.signum is None and len(self.active) < self.jobs
               and (self.limit is None or self.started < self.limit)):
            unit = self._next_unit()
            if unit is None:
                self.exhausted = True
                return
            trial = unit[0]
            if len(unit) > 1:
                self.skipped_in_a_row = 0
                self.started += len(unit)
                self.active.append(start_group(unit, self.plan, self._least_used_gpu()))
            elif self._skipped(trial):
                continue
            elif self.dry_run:
                self.started += 1
                self._record(Outcome(trial=trial, status="planned", skipped=True), "finished")
                self.echo(f"[{len(self.outcomes)}/{self.total or '?'}] {trial.name}\n    {' '.join(trial.command)}"
                          )
            else:
                self.skipped_in_a_row = 0
                self.started += 1
                self.runs.append(_engine_record(trial, "running"))
                why = self.why.get(trial.name) or self.alone or NOTHING_TO_STACK_WITH
                self.active.append(start_trial(trial, self.plan, alone=why, gpu=self._least_used_gpu()))

    def _least_used_gpu(self) -> str | None:
        """The visible GPU the fewest live trials use (the first of those), or None without GPUs or with one job."""
        if not self.gpus:
            return None
        return min(self.gpus, key=lambda gpu: sum(r.gpu == gpu for r in self.active))

    def collect(self, timeout_s: float | None) -> None:
        """Wait for one live trial to end (or for a termination signal); record and print it."""
        running = wait_any(self.active, timeout_s, lambda: self.signum is not None)
        if running is not None:
            self._finish(running)

    def _finish(self, running: Running, preempted: bool = False) -> list[Outcome]:
        if running.group and running.proc.returncode == REFUSED_EXIT and not preempted:
            return self._run_alone(running)
        outcomes = finish_trial(running, self.plan, preempted=preempted)
        self.active.remove(running)
        for outcome in outcomes:
            self._record(outcome, "finished" if outcome.status in DONE_STATUSES else "failed")
            eta = eta_seconds(self.outcomes, self.total, self.jobs) if self.show_eta else None
            self.echo(progress_line(len(self.outcomes), self.total, outcome, self.plan.metric, eta))
        return outcomes

    def _run_alone(self, running: Running) -> list[Outcome]:
        """A stacked process refused its group before training: its trials go back to run alone, first."""
        running.log_file.close()
        self.active.remove(running)
        reason = refusal_reason(RunPaths(running.trial.run_dir).trial.with_name("trial.log"))
        self.echo(f"{', '.join(t.name for t in running.group)}: {reason}; running them alone")
        self.why.update({t.name: reason for t in running.group})
        self.units[:0] = [[t] for t in running.group]
        self.started -= len(running.group)
        return []

    def on_signal(self, signum: int, frame: Any) -> None:
        """The sweep's handler for SIGTERM / SIGINT / SIGUSR1: forward to every live trial's process group
        at once (a trial ends its step, saves ``last.ckpt`` and exits) and stop starting new ones."""
        self.signum = int(signum)
        for running in self.active:  # every signal the sweep gets, once: a second Ctrl+C stops at once
            signal_group(running.proc, signum)
            running.signalled = True

    def stop(self, grace_s: float) -> list[Outcome]:
        """After a termination signal: wait up to ``grace_s`` for the live trials to save and exit
        (SIGKILL to the groups still alive then), and record them as preempted."""
        assert self.signum is not None
        for running in self.active:
            if not running.signalled:  # started while the signal arrived
                signal_group(running.proc, self.signum)
        deadline = time.time() + grace_s
        while any(r.proc.poll() is None for r in self.active) and time.time() < deadline:
            time.sleep(0.2)
        for running in self.active:
            if running.proc.poll() is None:
                log.warning("trial %s still running %.0f s after the signal: killing it", running.trial.name, grace_s)
                stop_process(running.proc, grace_s=0.0)
        return [o for running in list(self.active) for o in self._finish(running, preempted=True)]

    def interrupt(self) -> None:
        for running in self.active:
            stop_process(running.proc)
            for trial in running.group or [running.trial]:
                write_trial_json(trial, self.plan, status="interrupted")


def run_sweep(
    plan: SweepPlan,
    *,
    count: int | None = None,
    dry_run: bool = False,
    jobs: int = 1,
    timeout_s: float | None = None,
    seed: int = 0,
    echo: Callable[[str], None] = print,
    term_timeout_s: float = 300.0,
) -> list[Outcome]:
    """Run (or with ``dry_run`` list) the sweep's trials until the engine has no more or ``count``
    trials have been started; finished/diverged trials under the root are skipped, not counted.

    Failed and diverged trials are recorded and fed back to the engine; the sweep goes on.
    ``jobs`` trials run at once (the engine sees the live ones as running, as W&B's does).

    SIGTERM, SIGINT or SIGUSR1 to the sweep is forwarded to every live trial's process group; the
    sweep starts nothing more, waits up to ``term_timeout_s`` for the trials to save ``last.ckpt`` and
    exit, records them as preempted and exits with ``128 + signal`` (SystemExit). The next invocation
    resumes them from ``last.ckpt`` (:func:`start_trial`). If the sweep itself is killed, the kernel
    sends each trial SIGTERM (``ablations.engine.trialproc.dies_with``, Linux).
    """
    import numpy as np

    limit = count or plan.sweep.get("run_cap")
    if plan.sweep["method"] != "grid" and limit is None:
        raise SweepError(f"method {plan.sweep['method']!r} never runs out of proposals: give --count")
    random.seed(seed)
    np.random.seed(seed)  # random/bayes proposals repeat across invocations, so done trials are skipped
    session = _Session(plan, limit=limit, dry_run=dry_run, jobs=jobs, echo=echo)
    previous = install_handlers(session.on_signal)
    try:
        while session.signum is None:
            session.fill()
            if not session.active:
                return session.outcomes
            session.collect(timeout_s)
        stopped = session.stop(term_timeout_s)
    except KeyboardInterrupt:  # only where no handler could be installed (not the main thread)
        session.interrupt()
        raise
    finally:
        restore_handlers(previous)
    name = signal.Signals(session.signum).name
    print(f"attnlab sweep: stopped by {name}: {len(stopped)} running trial(s) recorded as preempted; "
          "run the same command again to resume them", file=sys.stderr)
    raise SystemExit(128 + session.signum)
