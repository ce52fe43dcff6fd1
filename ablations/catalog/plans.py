"""Render every question's plan (``Question.plan``) to its committed file, the registration its confirmatory
seeds are judged against (issue #42).

    python -m ablations.catalog.plans            # write docs/findings/plans/*.yaml and docs/findings/real/plans/
    python -m ablations.catalog.plans --check    # exit 1 naming each plan file that differs from its rendering

The file holds what the plan declares (``ablations.catalog.plan.Plan``) and what it reads from the question:
the sweep's arms split into judged and ranked-only, the metric and its goal, every comparison of the verdict
with its direction and smallest effect of interest (recorded from the verdict's own checks on no seeds,
``ablations.verdicts.rules.recording``), the quick preset, and the confirmatory seeds with the power estimate
behind their count (``ablations.catalog.power_estimate``). ``tests/ablations/test_plans.py`` asserts every
committed file equals its rendering, so a changed plan forces a new file (and, with a new version, fresh seeds).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from ablations.catalog.arms import REPO
from ablations.catalog.plan import CONFIRM_SUBDIR, EXPLORATORY, Plan
from ablations.catalog.power_estimate import count_from, estimate, exploratory_verdicts
from ablations.catalog.question import Question
from ablations.verdicts.rules import name, recording


def is_real(question: Question) -> bool:
    from ablations.catalog.questions_real import REAL_QUESTIONS

    return question.name in REAL_QUESTIONS


def plan_path(question: Question, root: Path = REPO) -> Path:
    """docs/findings/plans/<name>.yaml, or docs/findings/real/plans/<name>.yaml for a question on real data."""
    return root / "docs" / "findings" / ("real/plans" if is_real(question) else "plans") / f"{question.name}.yaml"


def comparisons(question: Question) -> tuple[list[dict[str, Any]], list[str]]:
    """(each check the verdict makes, as claim/spec/secondary, deduplicated by claim; the arms it judges)."""
    arms = question.arms()
    with recording() as made:
        question.verdict({}, arms)
    by_claim: dict[str, dict[str, Any]] = {}
    for check in made:
        by_claim[check.claim] = {"claim": check.claim, "spec": dict(check.spec), "secondary": check.secondary}
    return list(by_claim.values()), [name(a) for a in arms.judged]


def confirm_seeds(question: Question, plan: Plan, found: list[dict[str, Any]], root: Path) -> dict[str, Any]:
    """The confirmatory seed set: the plan's count, or the power estimate's, with the estimate behind it."""
    power = estimate(found, exploratory_verdicts(question.name, real=is_real(question), root=root))
    count = plan.seeds if plan.seeds is not None else power["count"]
    return {"set": f"confirmatory ({CONFIRM_SUBDIR}/)", "first": plan.first_seed, "count": count,
            "values": list(range(plan.first_seed, plan.first_seed + count)),
            "count_from": "declared in the plan" if plan.seeds is not None else count_from(power), "power": power}


def render(question: Question, root: Path = REPO) -> dict[str, Any]:
    """The plan file's content for ``question`` (which must have a plan)."""
    plan = question.plan
    if plan is None:
        raise ValueError(f"question {question.name} has no plan")
    found, judged = comparisons(question)
    swept = [name(a) for a in question.arms().every]
    return {
        "plan": plan.plan_id(question.name),
        "version": plan.version,
        "question": question.name,
        "claim": question.claim,
        "stated": plan.stated,
        "source": question.source,
        "own_hypothesis": plan.own or "none",
        "metric": {"name": question.metric, "goal": question.goal},
        "judged": judged,
        "ranked_only": [a for a in swept if a not in judged],
        "chosen": {k: str(v) for k, v in plan.chosen.items()},
        "chosen_why": plan.chosen_why,
        "comparisons": [{"claim": c["claim"], **({"secondary": True} if c["secondary"] else {}), **c["spec"]}
                        for c in found],
        "preset": {"sweep": f"sweeps/{question.sweep}", "scale": "quick", "flags": list(question.quick)},
        "preset_history": plan.preset_history or question.preset_changed or "none recorded",
        "exploratory": [f"{s} seeds {first}.. (read while choosing presets and rules)" for s, first in EXPLORATORY],
        "seeds": confirm_seeds(question, plan, found, root),
        "changes": plan.changes,
        "superseded": [vars(s) for s in plan.superseded],
    }


def text(question: Question, root: Path = REPO) -> str:
    return yaml.safe_dump(render(question, root), sort_keys=False, allow_unicode=True, width=110)


def every_question() -> list[Question]:
    from ablations.catalog.questions import QUESTIONS
    from ablations.catalog.questions_real import REAL_QUESTIONS

    return [*QUESTIONS.values(), *REAL_QUESTIONS.values()]


def load(question: Question, root: Path = REPO) -> dict[str, Any] | None:
    """The committed plan file's content, or None."""
    path = plan_path(question, root)
    return yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ablations.catalog.plans", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each file that differs")
    args = p.parse_args(argv)
    stale = []
    for question in every_question():
        path, want = plan_path(question), text(question)
        if path.is_file() and path.read_text(encoding="utf-8") == want:
            continue
        stale.append(str(path.relative_to(REPO)))
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(want, encoding="utf-8")
    verb = "differ from their rendering" if args.check else "written"
    print(f"plans: {len(stale)} {verb}" + (": " + ", ".join(stale) if stale else ""))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
