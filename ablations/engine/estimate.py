"""How long a sweep will take, said before its first trial starts: its trials × one trial's measured time / jobs.

The trial times are measurements, never guesses: a question's quick-scale trial time is its committed findings
run's (``docs/findings/<question>/result.json``: the trials' summed fit wall over their count, on the CPU that file
names), and the demo's is its benchmark's mean trial (:data:`DEMO_BENCH_S`); the demo's quoted time
(:func:`demo_quote`) is that benchmark's wall. Where nothing was measured (full scale, an installed
package without docs/, an ad-hoc sweep) the start line says so instead of inventing a number.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ablations.engine.trialstate import grid_size, minutes

DEMO_BENCH_S, DEMO_BENCH_TRIALS = 298.0, 15
"""The demo benchmark: ``attnlab demo`` as it runs by default (15 trials: three judged arms × the five confirmatory
seeds of its plan, 2 at once, one thread each, warm): 298 s on AMD EPYC (family 25, model 17), 2 cores, quiet
(BENCHMARKS.md, the demo's row). Its mean trial is the one measured demo trial time (:func:`demo_trial`)."""
DEMO_CPU = "AMD EPYC, 2 cores"
DEMO_TRIALS, DEMO_JOBS = 15, 2
"""The default demo's trials (three judged arms × the 5 confirmatory seeds its plan names,
``commands.demo_plan``; tests/ablations/test_estimate.py checks the two agree) and trials at once."""
SLOWER_CPU = 3
"""How much slower than the measuring machine a user's 2-core CPU was seen to be (an Intel Xeon kind ran the demo
at 2.6× its AMD EPYC time, BENCHMARKS.md; a newcomer's busy AMD EPYC at about 2.6× too): the start line's upper end."""
TIMEOUT_MARGIN = 15
"""A trial's default time limit is this many times its measured time (a hung trial is stopped; a slow CPU is not)."""


@dataclass(frozen=True)
class Measured:
    """One trial's measured wall time and where it was measured."""

    trial_s: float
    where: str


def demo_trial() -> Measured:
    """The demo's mean trial, from its benchmark: the wall over the trials each job ran."""
    return Measured(DEMO_BENCH_S * DEMO_JOBS / DEMO_BENCH_TRIALS, f"{DEMO_CPU}, BENCHMARKS.md")


def demo_estimate_s() -> float:
    """The default demo's wall, estimated: its trials, :data:`DEMO_JOBS` at once, at the benchmark's mean trial."""
    return math.ceil(DEMO_TRIALS / DEMO_JOBS) * demo_trial().trial_s


def demo_quote() -> str:
    """The one wording of the demo's time that README.md, docs/sweeps.md, ``attnlab --help`` and ``attnlab demo
    --help`` use (tests/ablations/test_estimate.py checks they do, and that the benchmark ran the default's trials)."""
    took = f"{DEMO_BENCH_TRIALS} trials took {DEMO_BENCH_S:.0f} s"
    return f"about {minutes(DEMO_BENCH_S)}, measured: its {took} on {DEMO_CPU}"


def demo_timeout_s() -> float:
    """The demo's default per-trial limit: :data:`TIMEOUT_MARGIN` × its measured mean trial."""
    return round(TIMEOUT_MARGIN * demo_trial().trial_s, -1)


def findings_trial(question: str, findings_dir: Path) -> Measured | None:
    """A question's quick-scale trial time from its committed findings run, or None where there is none."""
    try:
        result = json.loads((findings_dir / question / "result.json").read_text())
        trials = result["trials"] if isinstance(result["trials"], int) else len(result["trials"])
        wall = float(result["trial_wall_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if trials <= 0 or not wall > 0:
        return None
    cpu = (result.get("cpus") or ["an unnamed CPU"])[0].split(" (")[0]
    return Measured(wall / trials, f"{cpu}, 2 cores, docs/findings/{question}/result.json")


def planned_trials(sweep: Mapping[str, Any], *, count: int | None, baselines: int = 0) -> int | None:
    """The trials a sweep will start: its grid (``trialstate.grid_size``) plus the baseline arms' trials, or
    ``count``/``run_cap``."""
    limit = count or sweep.get("run_cap")
    grid = grid_size(sweep)
    if grid is None:
        return limit
    return min(grid, limit) + baselines if limit else grid + baselines


def start_line(name: str, *, trials: int | None, jobs: int, measured: Measured | None, idle_cores: int = 0) -> str:
    """What a sweep says before its first trial: how many trials, how many at once, and the estimate;
    ``idle_cores``: cores no trial will use (named, with the option that would use them)."""
    idle = (f" ({idle_cores} core{'s' * (idle_cores > 1)} left idle: --jobs {jobs + idle_cores} would use "
            f"{'them' if idle_cores > 1 else 'it'})")
    head = (f"{name}: {trials if trials is not None else 'an open number of'} trials, {jobs} at once"
            + (idle if idle_cores > 0 else ""))
    if trials is None or measured is None:
        return f"{head}; no measured trial time for this sweep at this scale, so no estimate"
    total = math.ceil(trials / jobs) * measured.trial_s
    return (f"{head}; about {minutes(total)} ({measured.trial_s:.0f} s a trial measured on {measured.where}; "
            f"a slower or busy CPU up to ~{minutes(SLOWER_CPU * total)}). A line follows as each trial ends.")
