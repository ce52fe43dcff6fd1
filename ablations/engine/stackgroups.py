"""Which of a sweep's trials the offline runner trains stacked (issue #26), and the command that does it.

When a grid sweeps several seeds per arm, the runner draws the grid's remaining trials at once and
groups the fresh ones by arm (every parameter but the seed; a baseline arm is one arm too). A group
of two or more runs as one process, ``python -m ablations.stacked`` with each trial's own ``fit``
arguments (``ablations/stacked.py``), which trains them as one vectorised model and writes each
trial's own run directory. Trials run alone when:

- the sweep says so: ``--no-stack``, a random/bayes method (each proposal needs the ones before), one seed;
- the trial was stopped part-way (``resumable``): it continues alone from its own ``last.ckpt``; a
  stacked group that was interrupted leaves each seed such a checkpoint (or none: it then reruns,
  stacked with the other fresh seeds of its arm, from scratch);
- the stacked process refuses the group (``ablations.stacked.REFUSED_EXIT``, e.g. a packed-RNN family):
  its seeds then run alone and each trial.json records why (``stacking``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ablations.engine.sweepspec import SEED_KEY, proposable_values
from ablations.engine.trialstate import resumable

if TYPE_CHECKING:
    from ablations.engine.trialstate import Trial

SEPARATOR = "---"
"""Between two seeds' arguments on the stacked command line."""
REFUSED_EXIT = 4
"""Exit status of a stacked process that refused its group before training anything."""
REFUSAL = "not stacked"
"""How its one line of reason begins."""
NOTHING_TO_STACK_WITH = "no other fresh seed of its arm, run by attnlab fit, to stack with"
STACK_HELP = ("train the fresh seeds of an arm as one vectorised model in one process (each writes its own run "
              "directory; trial.json says how each ran), or --no-stack: every trial in its own process; default: "
              "stacked where a GPU is visible, alone on CPU (no gain measured there: docs/benchmarks-history.md)")
"""``--stack/--no-stack`` of ``attnlab sweep`` and ``attnlab findings``."""


def default_stack() -> bool:
    """Stack by default only where an NVIDIA GPU is visible (``nvidia-smi`` on the PATH, CUDA_VISIBLE_DEVICES not
    emptied), where packing seeds is what fills the device. On CPU it stays off: the quick ``lm_positions``
    question took 409 s stacked against 394 s alone (Intel Xeon, 2 cores, docs/benchmarks-history.md), and a
    stacked seed's dropout masks come from the group's random stream, so a stacked rerun would not reproduce
    the findings recorded alone."""
    return shutil.which("nvidia-smi") is not None and os.environ.get("CUDA_VISIBLE_DEVICES", "0") not in ("", "-1")


def sweep_refusal(sweep: Mapping[str, Any], *, stack: bool) -> str | None:
    """Why none of this sweep's trials are stacked, or None (then the runner groups them by arm)."""
    if not stack:
        return "stacking turned off (--no-stack, or the default on a machine without a GPU)"
    if sweep.get("method") != "grid":
        return f"method {sweep.get('method')}: each proposal depends on the trials before it"
    spec = (sweep.get("parameters") or {}).get(SEED_KEY)
    if spec is None or len(proposable_values(SEED_KEY, spec)) < 2:
        return "one seed per arm"
    return None


def arm_of(params: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """A trial's arm: its parameters without the seed."""
    return tuple(sorted((k, repr(v)) for k, v in params.items() if k != SEED_KEY))


def units(trials: list[Trial], *, alone: Callable[[Trial], bool] = lambda trial: False) -> list[list[Trial]]:
    """The trials in their order, as groups of two or more fresh seeds of one arm and single trials (among
    them those ``alone`` names: the runner's done ones, which it skips)."""
    groups: dict[tuple[tuple[str, str], ...], list[Trial]] = {}
    out: list[list[Trial]] = []
    for trial in trials:
        if alone(trial) or resumable(trial.run_dir) or fit_args(trial.command) is None:
            out.append([trial])
        elif (arm := arm_of(trial.params)) in groups:
            groups[arm].append(trial)
        else:
            groups[arm] = [trial]
            out.append(groups[arm])
    return [unit for group in out for unit in ([group] if len(group) > 1 else [[t] for t in group])]


PROGRAMS = ("attnlab/cli.py", "attnlab_run/cli.py", "bin/attnlab", "attnlab")
"""How a trial's command names the project's own CLI (``program: attnlab/cli.py`` in the sweep files)."""


def fit_args(command: list[str]) -> list[str] | None:
    """The arguments from ``fit`` on of a command that runs the project's CLI (what ``attnlab`` parses);
    None for another program (its arguments may mean something else) or another subcommand."""
    if "fit" not in command:
        return None
    at = command.index("fit")
    program = command[at - 1] if at else ""
    ours = any(program == p or program.endswith("/" + p) for p in PROGRAMS)
    return command[at:] if ours else None


def stacked_command(trials: list[Trial], *, interpreter: str) -> list[str] | None:
    """``interpreter -m ablations.stacked <fit args 1> --- <fit args 2> ...``; None when a command has no fit."""
    parts = [fit_args(t.command) for t in trials]
    if any(p is None for p in parts):
        return None
    joined: list[str] = []
    for part in parts:
        joined += ([SEPARATOR] if joined else []) + list(part or [])
    return [interpreter, "-m", "ablations.stacked", *joined]


def refusal_reason(log_path: Path) -> str:
    """The ``not stacked: <why>`` line the stacked process printed (its last such line)."""
    try:
        lines = [ln for ln in log_path.read_text().splitlines() if ln.startswith(f"{REFUSAL}: ")]
    except OSError:
        lines = []
    return lines[-1] if lines else f"{REFUSAL}: the stacked process refused the group"
