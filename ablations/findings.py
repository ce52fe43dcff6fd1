"""``attnlab findings``: run every question at quick scale and write ``docs/findings/README.md``.

    attnlab findings                         # every question, 3 seeds per arm, 2 trials at once
    attnlab findings --only scaling --only norm
    attnlab findings --dry-run               # the trials it would run, and how many are already done
    attnlab findings --replicate             # the same on seeds 1001.. (runs/findings/replication); the README
                                             # then says whether each verdict replicated
    attnlab findings --power                 # more seeds (2001..) where a comparison sat within seed noise, n per
                                             # question fixed first in docs/findings/power/plan.json
                                             # (ablations.reports.power)
    attnlab findings --write-plans           # render every question's plan to docs/findings/plans/ (real:
                                             # docs/findings/real/plans/); commit them before --confirm
    attnlab findings --confirm               # each question's confirmatory seeds (3001..), as its committed
                                             # plan file names them, under runs/findings/confirm; the README
                                             # headlines these answers only (ablations.reports.headline)
    attnlab findings --real                  # the questions on real data (ablations.catalog.questions_real) instead:
                                             # runs/findings/real -> docs/findings/real/README.md

Resumable: trials whose summary says finished or diverged are skipped (the runner's rule), so an
interrupted run continues where it stopped. After each trial a progress line gives the trials done
over all questions and an ETA from the mean wall time of the trials run so far. The README has a
header (command, CPU, wall time), one row per claim (claim, source, verdict, key numbers) and a
section per question with its figures; each question's full report is ``<out>/<question>/report.md``.
The README is rebuilt from every question's saved ``<out>/<question>/result.json``
(``ablations.reports.findings_readme``), so ``--only`` refreshes those questions and keeps the rest.

``--real`` first checks that every selected question's data is in place (each data source's own check,
``ablations.real_data.missing_data``) and otherwise fails in one line naming what to install, exit 2,
before anything is created; its README header also names the data's package versions.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablations.catalog.plan import CONFIRM_FIRST, CONFIRM_SUBDIR
from ablations.catalog.questions import ORDER, QUESTIONS, Question
from ablations.catalog.questions_real import REAL_ORDER, REAL_QUESTIONS
from ablations.engine.stackgroups import STACK_HELP
from ablations.reports.findings_readme import hms, load_results, readme
from ablations.reports.power import PLAN, load_or_make_plan, planned_seeds, read_plan
from ablations.reports.power import SUBDIR as POWER_SUBDIR
from ablations.reports.record import QuestionResult, stamp
from ablations.verdicts.replication import FIRST_SEED, SUBDIR, folders, seed_values
from attnlab_core.errors import OneLineParser

log = logging.getLogger(__name__)

TRIAL_WALL = re.compile(r"\s(\d+(?:\.\d+)?)s$")  # the runner's progress line ends with the trial's wall time


@dataclass
class Progress:
    """Trials done over every question, and an ETA from the trials that actually ran."""

    total: int
    jobs: int = 1
    done: int = 0
    ran: int = 0
    ran_wall_s: float = 0.0
    t0: float = field(default_factory=time.time)

    def update(self, outcome: Any) -> str:
        """Count one trial (skipped ones cost no time) and return the progress line."""
        return self.tick(skipped=bool(outcome.skipped), wall_s=float(outcome.wall_s or 0.0))

    def tick(self, *, skipped: bool, wall_s: float = 0.0) -> str:
        self.done += 1
        if not skipped:
            self.ran += 1
            self.ran_wall_s += wall_s
        return self.line()

    def eta_s(self) -> float | None:
        """Time left (``trialstate.time_left``) from the trials run so far; None before the first."""
        from ablations.engine.trialstate import time_left

        return None if self.ran == 0 else time_left(self.ran_wall_s / self.ran, self.total - self.done, self.jobs)

    def line(self) -> str:
        eta = self.eta_s()
        elapsed = time.time() - self.t0
        return (
            f"findings: {self.done}/{self.total} trials, elapsed {hms(elapsed)}, "
            f"ETA {'?' if eta is None else hms(eta)}"
        )




def _plan(question: Question, root: Path, seeds: int | None, replicate: bool = False, stack: bool | None = None,
          power: dict[str, Any] | None = None, confirm: dict[str, list[int]] | None = None) -> Any:
    from ablations.runner import load_sweep, make_plan

    sweep = load_sweep(question.sweep_path)
    if confirm is not None:
        values: list[int] | None = confirm[question.name]
    else:
        values = planned_seeds(power, question.name) if power else seed_values(sweep, seeds, replicate=replicate)
    if values is not None:
        sweep["parameters"]["seed_everything"] = {"values": values}
    return make_plan(sweep, root=root, scale="quick", threads=1, stack=stack)


def _trials(plan: Any) -> int:
    """The plan's trials: its grid, then its question's baseline arms on the grid's seeds
    (``ablations.catalog.baselines``)."""
    from ablations.runner import grid_size

    return (grid_size(plan.sweep) or 0) + len(plan.baseline_trials())


def run_questions(
    questions: Sequence[Question],
    *,
    root: Path,
    jobs: int,
    timeout_s: float | None,
    seeds: int | None,
    dry_run: bool = False,
    echo: Callable[[str], None] = print,
    replicate: bool = False,
    stack: bool | None = None,
    power: dict[str, Any] | None = None,
    confirm: dict[str, list[int]] | None = None,
) -> Progress:
    """Run every question's quick sweep (skipping finished trials), echoing each trial and the overall ETA;
    ``replicate``: on the disjoint replication seeds (``ablations.verdicts.replication``); ``stack``: an arm's seeds
    trained stacked where they can be (None: ``ablations.engine.stackgroups.default_stack``); ``power``: each
    question on
    the fresh seeds its plan gives it (``ablations.reports.power``); ``confirm``: each question on the confirmatory
    seeds its committed plan file names (``confirm_seeds``)."""
    from ablations.reports.domains import run_domain_tests
    from ablations.runner import run_sweep

    plans = [_plan(q, root, seeds, replicate, stack, power, confirm) for q in questions]
    progress = Progress(total=sum(_trials(p) for p in plans), jobs=jobs)
    for question, plan in zip(questions, plans, strict=True):
        echo(f"== {question.name} ({_trials(plan)} trials) -> {plan.root / plan.name}")

        def trial_echo(line: str) -> None:
            if not line.startswith("["):  # not a trial's line (e.g. a dry run's command)
                echo("  " + line)
                return
            wall = TRIAL_WALL.search(line)
            status = progress.tick(skipped="skipped" in line or dry_run, wall_s=float(wall[1]) if wall else 0.0)
            echo(f"  {line}\n  {status}")

        run_sweep(plan, jobs=jobs, timeout_s=timeout_s, dry_run=dry_run, echo=trial_echo)
        if question.test_domains and not dry_run:
            run_domain_tests(plan.root / plan.name, question.test_domains, cwd=plan.cwd, env=plan.env, jobs=jobs,
                             echo=echo)
    return progress


def report_question(question: Question, *, root: Path, out: Path) -> QuestionResult | None:
    """Write ``out/<question>/report.md`` + figures + result.json from ``root/<question>``; None without runs."""
    from ablations.reports.report import write_report
    from ablations.reports.results import group_arms, load_experiment, stat

    exp = root / question.name
    runs = load_experiment(exp) if exp.is_dir() else []
    if not runs:
        return None
    report = write_report(question.name, runs, out / question.name, question)
    parts = []
    for arm, arm_runs in group_arms(runs, question.axes, question.baseline_of).items():
        done = [r.metrics.get(question.metric, float("nan")) for r in arm_runs if r.status == "finished"]
        s = stat(done)
        label = "/".join(map(str, arm))
        parts.append(f"{label} {s.mean:.3f} ± {s.std:.3f}" if s.n else f"{label} —")
    figures = [*report.figures, *(question.figures(out / question.name) if question.figures else [])]
    result = QuestionResult(
        name=question.name,
        verdict=report.verdict,
        key_numbers=f"`{question.metric}`: " + ", ".join(parts),
        report=str(report.path.relative_to(out)),
        figures=[str(f.relative_to(out)) for f in figures],
        warning=report.warning,
        trial_wall_s=sum(float(r.info.get("wall_time_s", 0.0) or 0.0) for r in runs),
        trials_span=_trial_span(runs),
        trials=len(runs),
        commits=_distinct(r.info.get("git_commit") for r in runs),
        cpus=_distinct((r.info.get("environment") or {}).get("cpu") for r in runs),
        written=stamp(),
        quick=list(question.quick),
    )
    result.save(out)
    return result


def _trial_span(runs: Sequence[Any]) -> list[float] | None:
    """[first start, last end] of the runs' trials (epoch seconds), from the runner's records
    (``results.load_run``: each trial's end minus its wall time)."""
    ends = [(r.info["trial_finished"] - r.info["trial_wall_s"], r.info["trial_finished"])
            for r in runs if "trial_finished" in r.info]
    return [min(a for a, _ in ends), max(b for _, b in ends)] if ends else None


def _distinct(values: Any) -> list[str]:
    return list(dict.fromkeys(str(v) for v in values if v))


def findings_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="attnlab findings",
        description="Run every ablation question at quick scale (resumable: finished trials are skipped) and write "
        "OUT/README.md: one row per claim with its verdict and key numbers, a section per question with "
        "its figures, and each question's full report under OUT/<question>/.",
    )
    p.add_argument("--real", action="store_true",
                   help="the questions on real data (needs their data packages; see docs/sweeps.md)")
    p.add_argument("--root", default=None,
                   help="runs directory (default: runs/findings, with --real runs/findings/real)")
    p.add_argument("--out", default=None,
                   help="where README.md and the reports go (default: docs/findings, with --real docs/findings/real)")
    p.add_argument(
        "--only",
        action="append",
        choices=[*QUESTIONS, *REAL_QUESTIONS],
        default=None,
        help="only this question (repeatable; real-data ones with --real); default: every question",
    )
    p.add_argument("--jobs", type=int, default=2, help="trials at once, one thread each (default 2)")
    p.add_argument("--seeds", type=int, default=None, help="seeds per arm (default: the sweep file's, 3)")
    p.add_argument("--timeout", type=float, default=900.0, help="stop a trial after this many seconds (default 900)")
    p.add_argument("--dry-run", action="store_true", help="list the trials (done ones marked skipped), run nothing")
    p.add_argument("--stack", action=argparse.BooleanOptionalAction, default=None, help=STACK_HELP)
    p.add_argument("--report-only", action="store_true", help="write the README from the runs already there")
    p.add_argument("--readme-only", action="store_true",
                   help="rebuild OUT/README.md from the saved results (OUT/<question>/result.json) alone: no run "
                        "is read or judged again")
    p.add_argument("--replicate", action="store_true",
                   help=f"run a second, disjoint seed set ({FIRST_SEED}, {FIRST_SEED + 1}, ...: never used while "
                        f"choosing a preset) under ROOT/{SUBDIR}, report it under OUT/{SUBDIR}, and mark in the "
                        "README whether each verdict replicated")
    p.add_argument("--confirm", action="store_true",
                   help=f"the confirmatory seeds each question's committed plan file names ({CONFIRM_FIRST}.. for a "
                        f"first plan) under ROOT/{CONFIRM_SUBDIR}, reported under OUT/{CONFIRM_SUBDIR}: the only "
                        "answers the README headlines. Refused when a plan file is missing or differs from its "
                        "rendering (commit the plans first: --write-plans)")
    p.add_argument("--write-plans", action="store_true",
                   help="render every question's plan to its file (docs/findings/plans/, docs/findings/real/plans/) "
                        "and stop")
    p.add_argument("--power", action="store_true",
                   help=f"more seeds where a comparison sits at the seeds' resolution: a third, disjoint set whose "
                        f"size per question is fixed once, from both earlier sets' verdicts, in "
                        f"OUT/{POWER_SUBDIR}/plan.json before any of it trains (ablations/reports/power.py); runs "
                        f"under "
                        f"ROOT/{POWER_SUBDIR}, reports under OUT/{POWER_SUBDIR}, fills the README's "
                        "'more seeds' column")
    return p


def _selection(args: argparse.Namespace) -> tuple[dict[str, Question], tuple[str, ...], str | None]:
    """(the question set, its order, a one-line error when --only names a question of the other set)."""
    pool, order = (REAL_QUESTIONS, REAL_ORDER) if args.real else (QUESTIONS, ORDER)
    wrong = [n for n in args.only or [] if n not in pool]
    if wrong:
        kind = "synthetic: drop --real" if args.real else "on real data: add --real"
        return pool, order, f"{', '.join(wrong)} is a question {kind}"
    return pool, order, None


def _missing_data_line(questions: Sequence[Question]) -> str | None:
    """One line naming what to install for every selected real question whose data is absent, else None."""
    from ablations.real_data import missing_data

    problems = missing_data(questions)
    if not problems:
        return None
    grouped: dict[str, list[str]] = {}
    for line in problems:
        name, _, why = line.partition(": ")
        grouped.setdefault(why, []).append(name)
    return "real data missing: " + "; ".join(f"{', '.join(names)}: {why}" for why, names in grouped.items())


def findings_main(argv: list[str]) -> int:
    """``attnlab findings``: exit 0 when the README was written, 1 when no question had runs, 2 on bad input."""
    args = findings_parser().parse_args(argv)
    if args.write_plans:
        from ablations.catalog.plans import main as write_plans

        return write_plans([])
    pool, order, wrong = _selection(args)
    clash = _power_clash(args)
    if args.jobs < 1 or (args.seeds is not None and args.seeds < 1) or wrong or clash:
        print(f"attnlab findings: error: {wrong or clash or '--jobs and --seeds must be at least 1'}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    names = args.only or [n for n in order if n in pool] + [n for n in pool if n not in order]
    questions = [pool[n] for n in names]
    sub = "/real" if args.real else ""
    root, out, t0 = Path(args.root or f"runs/findings{sub}"), Path(args.out or f"docs/findings{sub}"), time.time()
    subdir = CONFIRM_SUBDIR if args.confirm else POWER_SUBDIR if args.power else SUBDIR if args.replicate else None
    runs_at, reports_at = folders(root, out, subdir)
    confirm, problem = confirm_seeds(questions) if args.confirm else (None, None)
    if problem:
        print(f"attnlab findings: error: {problem}", file=sys.stderr)
        return 2
    if args.real and not (args.report_only or args.readme_only):
        missing = _missing_data_line(questions)
        if missing and not args.dry_run:
            print(f"attnlab findings: error: {missing}", file=sys.stderr)
            return 2
        print(f"findings --real: {missing or 'the data of every question is in place'}")
    power = _power_plan(out, order, pool, write=not args.dry_run) if args.power else None
    if power is not None:
        questions = [q for q in questions if planned_seeds(power, q.name)]
    if not (args.report_only or args.readme_only):
        run_questions(questions, root=runs_at, jobs=args.jobs, timeout_s=args.timeout, seeds=args.seeds,
                      dry_run=args.dry_run, replicate=args.replicate, stack=args.stack, power=power, confirm=confirm)
    if args.dry_run:
        return 0
    reported = [] if args.readme_only else [
        r for q in questions if (r := report_question(q, root=runs_at, out=reports_at)) is not None]
    if not reported and power is None and confirm is None and not args.readme_only:
        print(f"attnlab findings: error: no runs under {runs_at}", file=sys.stderr)
        return 1
    results = load_results(out, order, questions=pool)
    again, more = _by_name(out / SUBDIR, order, pool), _by_name(out / POWER_SUBDIR, order, pool)
    missing_q = [q for q in pool.values() if q.name not in {r.name for r in results}]
    command = "attnlab findings " + " ".join(argv) if argv else "attnlab findings"
    path = out / "README.md"
    path.write_text(readme(results, command=command.strip(), wall_s=time.time() - t0, missing=missing_q,
                           real=args.real, replications=again, more_seeds=more,
                           plan=read_plan(out), confirmed=_by_name(out / CONFIRM_SUBDIR, order, pool)))
    print(f"findings: {path} ({len(reported)} question(s) reported now, {len(results)} in the README)")
    return 0


def confirm_seeds(questions: Sequence[Question]) -> tuple[dict[str, list[int]] | None, str | None]:
    """(question -> the confirmatory seeds its committed plan file names, None) or (None, one-line error) when a
    plan file is missing or differs from its rendering from code (the registration must be committed first)."""
    from ablations.catalog import plans
    from ablations.reports.headline import plan_problem

    seeds, stale = {}, []
    for q in questions:
        path = plans.plan_path(q)
        if plan_problem(path, plans.text(q)):
            stale.append(str(path.relative_to(plans.REPO)))
            continue
        seeds[q.name] = list(plans.load(q)["seeds"]["values"])
    if stale:
        return None, (f"{', '.join(stale)} missing, not its plan's rendering or not committed: run attnlab findings "
                      "--write-plans, commit the plan files, then --confirm")
    return seeds, None


def _power_clash(args: argparse.Namespace) -> str | None:
    """The one-line error of --power with an option that would choose the seeds another way, else None."""
    chosen = [flag for flag, on in (("--confirm", args.confirm), ("--power", args.power),
                                    ("--replicate", args.replicate)) if on]
    if len(chosen) > 1:
        return f"{' and '.join(chosen)} are different seed sets: choose one"
    if args.confirm and args.seeds:
        return "--confirm takes each question's seeds from its plan file: drop --seeds"
    if args.power and args.seeds:
        return "--power takes each question's seed count from its plan: drop --seeds"
    if args.power and args.replicate:
        return "--power and --replicate are two different seed sets: choose one"
    return None


def _by_name(out: Path, order: Sequence[str], pool: dict[str, Question]) -> dict[str, QuestionResult]:
    return {r.name: r for r in load_results(out, order, questions=pool)}


def _power_plan(out: Path, order: Sequence[str], pool: dict[str, Question], *, write: bool) -> dict[str, Any]:
    """The third seed set's plan (``ablations.reports.power``): read from OUT/power/plan.json, or made from the saved
    verdicts of both earlier sets and written there (not on a dry run); each planned question printed."""
    main, again = _by_name(out, order, pool), _by_name(out / SUBDIR, order, pool)
    plan, made = load_or_make_plan(out, main, again, write=write)
    print(f"findings --power: plan {'made now' if made else 'as declared'} {plan.get('declared')} "
          f"({out / POWER_SUBDIR / PLAN}{'' if write or not made else ', not written: dry run'})")
    for name, entry in plan.get("questions", {}).items():
        print(f"  {name}: {entry['seeds']} seeds" if entry["seeds"] else f"  {name}: none ({entry['why']})")
    return plan

