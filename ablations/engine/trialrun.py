"""A trial's process in the offline runner: started (alone, or stacked with the other fresh seeds of its
arm: ``ablations.engine.stackgroups``), recorded in ``trial.json`` and, once it ends, turned into Outcomes."""

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ablations.engine.stackgroups import stacked_command
from ablations.engine.trialproc import dies_with
from ablations.engine.trialstate import Outcome, Trial, read_json, resumable, trial_status
from ablations.engine.warm import WarmProcess, server_for, warm_argv
from attnlab_run.rundir import DONE, RunPaths, Status, read_summary

log = logging.getLogger(__name__)


class SweepPlan(Protocol):
    """What a trial's process reads of ``ablations.runner.SweepPlan`` (a Protocol: the runner imports this module)."""

    name: str
    interpreter: str
    cwd: Path
    env: dict[str, str]
    warm: bool

    @property
    def metric(self) -> str | None: ...

DONE_STATUSES = tuple(s.value for s in DONE)


@dataclass
class Running:
    """A trial (or a stacked group of trials, ``group``) whose subprocess is alive."""

    trial: Trial
    proc: subprocess.Popen | WarmProcess
    log_file: Any
    started: float
    resumed: bool = False
    signalled: bool = False  # the sweep forwarded a termination signal to it
    group: list[Trial] = field(default_factory=list)  # the stacked seeds (trial is the first), else empty
    gpu: str | None = None  # the one GPU it sees (``--jobs`` spreads trials over the visible GPUs), or None

    @property
    def budget(self) -> int:
        """Trials this process runs: its time limit is that many trials' (``trialproc.wait_any``)."""
        return len(self.group) or 1


def write_trial_json(trial: Trial, plan: SweepPlan, **fields: Any) -> None:
    record = {"name": trial.name, "sweep": plan.name, "params": trial.params, "command": trial.command, **fields}
    RunPaths(trial.run_dir).trial.write_text(json.dumps(record, indent=2, default=str))


def visible_gpus(env: Mapping[str, str]) -> list[str]:
    """The GPUs trials may use: the entries of ``CUDA_VISIBLE_DEVICES`` where it is set (up to a "-1"),
    else one per GPU ``nvidia-smi -L`` lists; none without either."""
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        entries = [d.strip() for d in listed.split(",")]
        return list(itertools.takewhile(lambda d: d not in ("", "-1"), entries))
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i in range(sum(line.startswith("GPU ") for line in out.splitlines()))]


def _launch(trial: Trial, plan: SweepPlan, command: list[str], log_file: Any,
            gpu: str | None = None) -> subprocess.Popen | WarmProcess:
    """Start one command (an argument list, never a shell string) in its own process group (so a
    signal to the group reaches its DDP ranks too), set to get SIGTERM if the sweep dies: forked from
    the warm server when the plan is warm and the command runs the plan's interpreter, else cold.
    ``gpu``: the one GPU it sees (``CUDA_VISIBLE_DEVICES``), or None: every GPU the sweep sees."""
    env = plan.env if gpu is None else {**plan.env, "CUDA_VISIBLE_DEVICES": gpu}
    log_file.write(f"$ {'' if gpu is None else f'CUDA_VISIBLE_DEVICES={gpu} '}{' '.join(command)}\n")
    log_file.flush()
    argv = warm_argv(command, plan.interpreter) if plan.warm else None
    server = server_for(interpreter=plan.interpreter, env=plan.env, cwd=plan.cwd) if argv else None
    if argv and server is not None:
        try:
            return server.launch(argv, command=command, env=env, cwd=plan.cwd, log_path=Path(log_file.name))
        except OSError as err:
            log.warning("trial %s: %s; starting it cold", trial.name, err)
    return subprocess.Popen(command, cwd=plan.cwd, env=env, stdout=log_file, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=dies_with(os.getpid()))


def start_trial(trial: Trial, plan: SweepPlan, *, alone: str, gpu: str | None = None) -> Running:
    """Write trial.json and start the fit: from ``last.ckpt`` when the trial was stopped part-way
    (:func:`resumable`), otherwise in a cleared run directory. ``alone``: why it is not stacked."""
    resume = resumable(trial.run_dir)
    if not resume and (trial.run_dir / "trial.json").exists():
        shutil.rmtree(trial.run_dir)
    trial.run_dir.mkdir(parents=True, exist_ok=True)
    command = [*trial.command, "--ckpt_path=last"] if resume else trial.command
    stacking = "alone: resumed from its own last.ckpt" if resume else f"alone: {alone}"
    write_trial_json(trial, plan, status="running", started=time.time(), resumed=resume, stacking=stacking)
    log_file = (trial.run_dir / "trial.log").open("a" if resume else "w")
    return Running(trial=trial, proc=_launch(trial, plan, command, log_file, gpu), log_file=log_file,
                   started=time.time(), resumed=resume, gpu=gpu)


def start_group(trials: list[Trial], plan: SweepPlan, gpu: str | None = None) -> Running:
    """Start fresh seeds of one arm as one stacked process (``ablations.stacked``) in cleared run
    directories; its output goes to the first trial's trial.log (the others' name it)."""
    command = stacked_command(trials, interpreter=plan.interpreter)
    assert command is not None, "stackgroups.units groups only fit commands"
    names = [t.name for t in trials]
    for trial in trials:
        if (trial.run_dir / "trial.json").exists():
            shutil.rmtree(trial.run_dir)
        trial.run_dir.mkdir(parents=True, exist_ok=True)
        write_trial_json(trial, plan, status="running", started=time.time(), resumed=False,
                         stacking=f"stacked: {', '.join(names)}", stacked_command=command)
    for trial in trials[1:]:
        (trial.run_dir / "trial.log").write_text(f"stacked with {', '.join(names)}: output in "
                                                 f"{trials[0].run_dir / 'trial.log'}\n")
    log_file = (trials[0].run_dir / "trial.log").open("w")
    return Running(trial=trials[0], proc=_launch(trials[0], plan, command, log_file, gpu), log_file=log_file,
                   started=time.time(), group=list(trials), gpu=gpu)


def finish_trial(running: Running, plan: SweepPlan, *, preempted: bool = False) -> list[Outcome]:
    """The process ended: record and return the Outcome of each of its trials. ``preempted``: the sweep
    stopped it (a forwarded signal), so a trial that did not finish anyway is preempted, to be resumed
    next time. A stacked group's wall time is shared out among its trials (their Outcomes and trial.json)."""
    running.log_file.close()
    trials = running.group or [running.trial]
    wall = (time.time() - running.started) / len(trials)
    return [_outcome(trial, plan, running, wall, preempted) for trial in trials]


def _outcome(trial: Trial, plan: SweepPlan, running: Running, wall: float, preempted: bool) -> Outcome:
    rc = running.proc.returncode
    status = trial_status(trial.run_dir, rc)
    if preempted and status not in DONE_STATUSES:
        status = Status.PREEMPTED.value
    metrics = read_summary(trial.run_dir).metrics
    value = metrics.get(plan.metric) if plan.metric else None
    record = read_json(RunPaths(trial.run_dir).trial)
    group = {"group_wall_s": round(wall * len(running.group), 1)} if running.group else {}
    write_trial_json(trial, plan, status=status, returncode=rc, wall_s=round(wall, 1), metric=value,
                     finished=round(time.time(), 1), resumed=running.resumed,
                     **{k: record[k] for k in ("stacking", "stacked_command") if k in record}, **group)
    return Outcome(trial=trial, status=status, returncode=rc, metric=value, wall_s=wall,
                   summary_metrics={k: v for k, v in metrics.items() if isinstance(v, (int, float))})
