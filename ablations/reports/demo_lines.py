"""What ``attnlab demo`` says (issue #42): the attention-bottleneck question's main claim as its headline, the
secondary checks beneath it and never folded into it, on the confirmatory seeds the question's plan file names: the
demo reproduces the answer the findings headline.

Every printed line is at most ``WIDTH`` columns. The per-length accuracy table is the report's (``write_report``).
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

from ablations.catalog.question import Question
from ablations.verdicts.rules import Check, gate_holds, head_of

WIDTH = 100
FALLBACK_SEEDS = 3
"""Seeds when the question's plan file is not in this checkout (an installed package has no docs/)."""
_DELTA = re.compile(r"Δ=[+-][\d.]+ \[[^\]]*\]")
_MEAN = re.compile(r": (\S+) ([\d.]+ ± [\d.]+(?: \[[^\]]*\])?) \(([≤≥] [\d.e+-]+) wanted\)")


def demo_seeds(question: Question) -> tuple[list[int], str]:
    """(seeds, why): the confirmatory seeds the question's plan file names, so the demo's headline is the answer
    the findings headline, reproduced on this machine (an exploratory seed set is never a headline); the first
    ``FALLBACK_SEEDS`` seeds where the plan file is not in this checkout (an installed package has no docs/)."""
    from ablations.catalog.plans import load, plan_path

    plan = load(question)
    if plan is None:
        return list(range(1, FALLBACK_SEEDS + 1)), f"no plan file found ({plan_path(question).name} absent)"
    return [int(v) for v in plan["seeds"]["values"]], f"the confirmatory seeds of {plan_path(question).name}"


def _numbers(check: Check) -> str:
    """The few numbers a reader needs: the paired difference, or the arm's mean against its bound."""
    if m := _DELTA.search(check.detail):
        return m[0]
    if m := _MEAN.search(check.detail):
        return f"{m[1]} {m[2]}, {m[3]} wanted"
    return ""


def _line(check: Check) -> str:
    why = f" ({check.why})" if check.why else ""
    numbers = f" — {n}" if (n := _numbers(check)) else ""
    return textwrap.fill(f"- {check.claim}: {check.answer}{why}{numbers}", WIDTH, subsequent_indent="    ")


def headline_lines(question: Question, main: list[Check], extra: list[Check], gate: Check | None) -> list[str]:
    """The headline (the main claim's answer), each main check, then the secondary checks under their own title.
    A failed ``gate`` heads only where it holds (``rules.gate_holds``: never over a wrong sign); else it is listed
    first among the main checks, as ``rules.join`` does."""
    held = gate_holds(gate, main)
    answer = f"{gate.answer} ({gate.why})" if held and gate is not None else head_of(main)
    main = [gate, *main] if gate is not None and not held else main
    lines = [textwrap.fill(f"Headline: {answer}", WIDTH, subsequent_indent="  "),
             textwrap.fill(f"  claim: {question.claim} ({question.source})", WIDTH, subsequent_indent="    ")]
    lines += [_line(c) for c in main]
    if extra:
        lines.append("Secondary checks (listed, not part of the headline):")
        lines += [_line(c) for c in extra]
    return lines


def demo_lines(question: Question, stats: Any) -> list[str]:
    """The demo's headline and secondary lines for the attention-bottleneck statistics ``stats``."""
    from ablations.catalog.claims_recurrent import bottleneck_checks, bottleneck_gate

    arms = question.arms()
    gate = bottleneck_gate(stats, arms)
    main, extra = bottleneck_checks(stats, arms)
    return headline_lines(question, main, extra, gate)


def print_demo(exp_dir: Path, question: Question) -> bool:
    """Write the report of the demo's runs, print its table and the headline lines; False without runs."""
    from ablations.reports.report import question_values, write_report
    from ablations.reports.results import arm_stats, group_arms, load_experiment

    runs = load_experiment(exp_dir) if exp_dir.is_dir() else []
    if not runs:
        return False
    report = write_report(exp_dir.name, runs, exp_dir, question)
    stats = arm_stats(group_arms(runs, question.axes, question.baseline_of), question_values(question))
    print(f"\n== {exp_dir.name} ==\n{report.table}\n")
    print("\n".join(demo_lines(question, stats)))
    print(f"report (every check and number): {report.path}")
    return True
