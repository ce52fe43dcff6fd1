"""``attnlab sweep | report | demo``: run a sweep offline, write the comparison report, or both
for the attention-bottleneck question at quick scale.

    attnlab sweep sweeps/norm.yaml --scale quick --root runs      # every trial, offline
    attnlab sweep sweeps/norm.yaml --dry-run --count 4            # print the trials' commands
    attnlab report runs                                           # runs/<sweep>/report.md + PNGs
    attnlab demo                                                  # the quick demo and its report
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ablations.catalog.questions import QUESTIONS, SWEEPS_DIR
from ablations.engine.estimate import (
    SLOWER_CPU,
    TIMEOUT_MARGIN,
    demo_quote,
    demo_timeout_s,
    demo_trial,
    planned_trials,
    start_line,
)
from ablations.engine.stackgroups import STACK_HELP
from ablations.findings import findings_main
from attnlab_core.errors import OneLineParser

# The sweeps engine's pydantic models use v1 config names; the warning is noise for our users.
warnings.filterwarnings("ignore", message="Valid config keys have changed in V2")

if TYPE_CHECKING:
    from ablations.runner import SweepPlan

log = logging.getLogger(__name__)

DEMO_QUESTION = "attention_bottleneck"


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not allowed: give an integer >= 1")
    return value


T = TypeVar("T")


def positive_float(text: str) -> float:
    """An argparse type: a number > 0."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not allowed: give a number > 0")
    return value


def wandb_failure(err: BaseException) -> str | None:
    """One line for a W&B API error the user can fix (no credentials, no access), else None."""
    if not type(err).__module__.startswith("wandb"):
        return None
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    if "API key" in text or type(err).__name__ in ("UsageError", "AuthenticationError"):
        return f"W&B refused: {text} (run `wandb login` or set WANDB_API_KEY; this needs network access)"
    return f"W&B request failed: {text}"


def with_wandb_failures(call: Callable[[], T], *, command: str, about: str = "") -> T | int:
    """``call()``; a W&B error the user can fix (:func:`wandb_failure`) becomes one stderr line (``about``
    before the reason) and the exit status 2, returned in place of the call's result."""
    try:
        return call()
    except Exception as err:  # noqa: BLE001 - wandb's errors have no common base we can import cheaply
        line = wandb_failure(err)
        if line is None:
            raise
        print(f"attnlab {command}: error: {about}{line}", file=sys.stderr)
        return 2


def _sweep_path(arg: str) -> Path:
    """A sweep file path, or a bare sweep name resolved under ``sweeps/``."""
    path = Path(arg)
    if path.is_file():
        return path
    candidate = SWEEPS_DIR / f"{arg.removesuffix('.yaml')}.yaml"
    if candidate.is_file():
        return candidate
    raise FileNotFoundError(f"no sweep file {arg!r} (and no sweeps/{candidate.name}); "
                            f"known questions: {', '.join(QUESTIONS)}")


def sweep_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="attnlab sweep", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a W&B sweep file offline: W&B's own sweeps engine proposes each trial and the trial runs "
                    "as a subprocess with exactly the command `wandb agent` would run, plus --run.root/experiment/"
                    "name so every trial lands in ROOT/<sweep name>/<trial name>/. Re-running skips trials whose "
                    "summary.json says finished or diverged; failed trials are recorded and retried next time.",
        epilog="Online instead: wandb sweep SWEEP.yaml && wandb agent ENTITY/PROJECT/ID (from the repo root).")
    p.add_argument("sweep", help="sweep YAML file (or a name under sweeps/, e.g. 'norm')")
    p.add_argument("--count", type=positive_int, default=None,
                   help="start at most N trials (required for random/bayes unless the file sets run_cap)")
    p.add_argument("--dry-run", action="store_true", help="print the trials' commands without running them")
    p.add_argument("--scale", choices=("quick", "full"), default="full",
                   help="quick: append the question's small-data overrides (a trial measured 9 s to 2 min on 2 AMD "
                        "EPYC cores, by question: docs/findings/<question>/result.json; the start line gives this "
                        "sweep's estimate); full: the config as written (default)")
    p.add_argument("--root", default="runs", help="runs directory (default: runs)")
    p.add_argument("--jobs", type=positive_int, default=1,
                   help="trials run at once (default 1, which leaves the other cores of a multi-core CPU idle: "
                        "at --scale quick each trial uses one thread, so --jobs N uses N cores)")
    p.add_argument("--threads", type=positive_int, default=None,
                   help="OMP/MKL threads per trial (default: 1 with --scale quick or --jobs > 1, else inherited)")
    p.add_argument("--timeout", type=positive_float, default=None, help="stop a trial after this many seconds")
    p.add_argument("--seed", type=int, default=0, help="seed of the engine's proposals (random/bayes)")
    p.add_argument("--report", action="store_true", help="write ROOT/<sweep name>/report.md when done")
    p.add_argument("--warm", action=argparse.BooleanOptionalAction, default=None,
                   help="fork each trial from a server that has already imported torch, Lightning and the "
                        "project, with the same argv, environment, cwd and log (saves the imports per trial); "
                        "default: warm on Linux unless ATTNLAB_WARM_TRIALS=0 (which also turns it off for "
                        "attnlab findings/demo); --no-warm: a fresh interpreter per trial")
    p.add_argument("--quiet", action="store_true",
                   help="no line per trial (only the totals); the ETA is shown only on a terminal anyway")
    p.add_argument("--stack", action=argparse.BooleanOptionalAction, default=None, help=STACK_HELP)
    return p


def _threads(args: argparse.Namespace) -> int | None:
    if args.threads is not None:
        return args.threads
    busy = args.scale == "quick" or args.jobs > 1
    return 1 if busy and "OMP_NUM_THREADS" not in os.environ else None


def sweep_main(argv: list[str]) -> int:
    """``attnlab sweep``: exit 0 when no trial failed, 1 when one did, 2 for a bad sweep file."""
    from ablations.engine.sweepspec import check_parameters
    from ablations.runner import SweepError, load_sweep, make_plan, run_sweep
    from attnlab_core.errors import UsageError
    from attnlab_run.inputs import check_creatable

    args = sweep_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        check_creatable(Path(args.root), option=f"--root {args.root}")
        path = _sweep_path(args.sweep)
        sweep = load_sweep(path)
        plan = make_plan(sweep, root=args.root, scale=args.scale, threads=_threads(args),
                         warm=args.warm, stack=args.stack)
        if not (args.dry_run or args.quiet):  # before the parameter check, which imports torch and Lightning
            print(_sweep_start_line(plan, args), flush=True)
        check_parameters(sweep, path=path, cwd=plan.cwd)
        outcomes = run_sweep(plan, count=args.count, dry_run=args.dry_run, jobs=args.jobs, timeout_s=args.timeout,
                             seed=args.seed, echo=(lambda line: None) if args.quiet else print)
    except (SweepError, FileNotFoundError, UsageError) as err:
        print(f"attnlab sweep: error: {err}", file=sys.stderr)
        return 2
    counts: dict[str, int] = {}
    for o in outcomes:
        key = "skipped" if o.skipped and o.status != "planned" else o.status
        counts[key] = counts.get(key, 0) + 1
    print(f"{plan.name}: {len(outcomes)} trials (" + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
          + f") in {plan.root / plan.name}")
    if args.dry_run and args.scale == "full" and plan.sweep.get("method") == "grid":
        from ablations.engine.gpu_hours import print_estimate
        from ablations.stacked import build

        print_estimate(plan, build)
    if args.report and not args.dry_run:
        _print_report(plan.root / plan.name)
    elif not args.dry_run:
        print(f"report: attnlab report {plan.root / plan.name}")
    return 1 if counts.get("failed") else 0


def _sweep_start_line(plan: SweepPlan, args: argparse.Namespace) -> str:
    """The sweep's trials, jobs, idle cores and measured estimate (``ablations.engine.estimate``)."""
    from ablations.catalog.questions import REPO
    from ablations.engine.estimate import findings_trial, planned_trials, start_line

    trials = planned_trials(plan.sweep, count=args.count, baselines=len(plan.baseline_trials()))
    measured = findings_trial(plan.name, REPO / "docs" / "findings") if args.scale == "quick" else None
    threads = _threads(args) or os.cpu_count() or 1
    idle = max(0, (os.cpu_count() or 1) - args.jobs * threads) if args.scale == "quick" else 0
    return start_line(plan.name, trials=trials, jobs=args.jobs, measured=measured, idle_cores=idle)


def _print_report(exp_dir: Path) -> bool:
    """Write and print the report of one experiment directory; False when it holds no runs."""
    from ablations.reports.report import write_report
    from ablations.reports.results import load_experiment

    runs = load_experiment(exp_dir) if exp_dir.is_dir() else []
    if not runs:
        return False
    report = write_report(exp_dir.name, runs, exp_dir)
    print(f"\n== {exp_dir.name} ==\n{report.table}\n{report.verdict}\nreport: {report.path}")
    return True


def report_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="attnlab report",
        description="Compare the arms of each ablation question: table (mean ± std over seeds, diverged/failed "
                    "runs shown), learning curves with seed bands, accuracy by length, probe plots, attention "
                    "maps side by side and the verdict, written to RUNS_DIR/<experiment>/report.md + PNGs.")
    p.add_argument("runs_dir", help="runs root (holding <experiment>/<run>/) or one experiment directory")
    p.add_argument("--experiment", action="append", default=None, help="only this experiment (repeatable)")
    p.add_argument("--wandb-sweep", default=None, metavar="ENTITY/PROJECT/ID",
                   help="read an online sweep through the W&B API instead (needs network and credentials); "
                        "the report is written to RUNS_DIR/<sweep name>/")
    return p


def report_main(argv: list[str]) -> int:
    """``attnlab report``: exit 0 when at least one report was written, 2 when no runs were found."""
    from ablations.reports.report import write_report
    from ablations.reports.results import experiment_dirs, load_experiment, load_wandb_sweep

    args = report_parser().parse_args(argv)
    root = Path(args.runs_dir)
    if args.wandb_sweep:
        loaded = with_wandb_failures(lambda: load_wandb_sweep(args.wandb_sweep), command="report",
                                     about=f"--wandb-sweep {args.wandb_sweep}: ")
        if isinstance(loaded, int):
            return loaded
        name, runs = loaded
        found = {name: (root / name, runs)}
    else:
        found = {name: (d, load_experiment(d)) for name, d in experiment_dirs(root).items()}
    missing = sorted(set(args.experiment or ()) - set(found))
    if missing:
        print(f"attnlab report: error: no experiment {missing[0]!r} under {root}"
              f" (there: {', '.join(sorted(found)) or 'none'})", file=sys.stderr)
        return 2
    found = {k: v for k, v in found.items() if v[1] and (not args.experiment or k in args.experiment)}
    if not found:
        print(f"attnlab report: error: no runs under {root}", file=sys.stderr)
        return 2
    for name, (out, runs) in found.items():
        report = write_report(name, runs, out)
        print(f"\n== {name} ==\n{report.table}\n{report.verdict}\nreport: {report.path}")
    return 0


def demo_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="attnlab demo",
        description=f"Run the {DEMO_QUESTION!r} question (recurrent seq2seq on reverse: attention none, additive "
                    "and hard, the arms its plan judges) at quick scale on the seeds that resolve its main claim, "
                    "then write the report and print its table, the main claim's answer as the headline and the "
                    f"secondary checks beneath it. Its time: {demo_quote()} (BENCHMARKS.md); a slower or busy CPU "
                    f"takes up to ~{SLOWER_CPU}x that, and the start line says so.")
    p.add_argument("--root", default="runs/demo", help="runs directory (default: runs/demo)")
    p.add_argument("--seeds", type=positive_int, default=None,
                   help="run seeds 1..SEEDS per arm (exploratory; default: the confirmatory seeds the question's "
                        "plan file names, 3001-3005, so the demo reproduces the findings' headline)")
    p.add_argument("--all-arms", action="store_true",
                   help="also the ranked-only arms (dot and general attention)")
    p.add_argument("--jobs", type=positive_int, default=2, help="trials at once, one thread each (default 2)")
    p.add_argument("--timeout", type=positive_float, default=demo_timeout_s(),
                   help=f"stop a trial after this many seconds (default {demo_timeout_s():.0f}: {TIMEOUT_MARGIN}x the "
                        "demo's measured mean trial)")
    return p


def demo_plan(root: str | Path, *, seeds: int | Sequence[int], all_arms: bool = False) -> SweepPlan:
    """The demo's sweep: the arms ``DEMO_QUESTION``'s verdict judges (every arm with ``all_arms``) at quick scale
    on ``seeds`` (a count n: seeds 1..n), one thread a trial."""
    from ablations.catalog.plans import comparisons
    from ablations.runner import load_sweep, make_plan

    question = QUESTIONS[DEMO_QUESTION]
    sweep = load_sweep(question.sweep_path)
    values = list(range(1, seeds + 1)) if isinstance(seeds, int) else list(seeds)
    sweep["parameters"]["seed_everything"] = {"values": values}
    if not all_arms:
        judged = comparisons(question)[1]
        axis = sweep["parameters"][question.axes[0]]
        axis["values"] = [v for v in axis["values"] if str(v) in judged]
    return make_plan(sweep, root=root, scale="quick", threads=1)


def demo_main(argv: list[str]) -> int:
    """``attnlab demo``: exit 0 when the report was written."""
    from ablations.reports.demo_lines import demo_seeds, print_demo
    from ablations.runner import run_sweep

    args = demo_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    t0 = time.time()
    question = QUESTIONS[DEMO_QUESTION]
    seeds, why = (list(range(1, args.seeds + 1)), "--seeds") if args.seeds else demo_seeds(question)
    plan = demo_plan(args.root, seeds=seeds, all_arms=args.all_arms)
    trials = planned_trials(plan.sweep, count=None)
    print(start_line(f"demo ({DEMO_QUESTION} at quick scale, seeds {seeds[0]}-{seeds[-1]} ({why}), -> {plan.root})",
                     trials=trials, jobs=args.jobs, measured=demo_trial()), flush=True)
    run_sweep(plan, jobs=args.jobs, timeout_s=args.timeout)
    ok = print_demo(plan.root / plan.name, question)
    print(f"demo finished in {time.time() - t0:.0f} s")
    return 0 if ok else 1


def dashboard_main(argv: list[str]) -> int:
    """``attnlab dashboard``: save a W&B workspace view of one question (wandb-workspaces extra)."""
    from ablations.reports.dashboard import dashboard_main as run

    return with_wandb_failures(lambda: run(argv), command="dashboard")


COMMANDS = {"sweep": sweep_main, "report": report_main, "demo": demo_main, "findings": findings_main,
            "dashboard": dashboard_main}
"""``attnlab <name>`` -> its function (argv after the name -> exit code); the ``attnlab`` command
(``attnlab/cli.py``) lists and dispatches every entry, so a new command is one line here."""
SUMMARIES = {
    "sweep": "run a sweep file offline on W&B's sweeps engine, each trial as `wandb agent` would run it",
    "report": "compare a question's arms: table (mean ± std over seeds), curves, attention maps, verdict",
    "demo": f"the {DEMO_QUESTION} question at quick scale, then its report ({demo_quote()})",
    "findings": "every question at quick scale (resumable), then docs/findings/README.md: one row per claim",
    "dashboard": "save a W&B workspace view of a question: metric by arm, runs grouped by arm, probes, images",
}
"""One help line per command for ``attnlab --help`` (else the function's docstring is used)."""


def dispatch(argv: list[str]) -> int | None:
    """Run ``attnlab sweep|report|demo`` when ``argv`` starts with one (its exit code); None: not ours,
    LightningCLI's subcommands (fit/validate/test/predict) take it."""
    if argv and argv[0] in COMMANDS:
        return COMMANDS[argv[0]](list(argv[1:]))
    return None
