"""What the findings tables headline (issue #42): the confirmatory answer only, and only when it may be read.

A question's headline is its confirmatory seed set's answer (``attnlab findings --confirm``: the seeds its
committed plan names, under ``<out>/confirm``). Without confirmatory runs it is "pending: confirmatory seeds not
run", while the exploratory answers (main 1.., replication 1001.., power 2001..) are shown labelled exploratory.
A confirmatory result is refused a headline when its plan file was committed after the commit its runs record
(the plan could have been written after the answer was seen), when the plan file is not committed at all, or
when the runs' quick preset differs from the plan's. The README's change table gives, for each question, the
old headline (the main seeds' answer), the new one and why it changed (the plan's ``changes``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ablations.reports.record import QuestionResult
from ablations.verdicts.rules import verdict_word
from attnlab_core.repo import git

PENDING = "pending: confirmatory seeds not run"


def plan_commit_time(path: Path) -> int | None:
    """Epoch seconds of the last commit that touched the plan file (None: not committed, or no git)."""
    out = git(["log", "-1", "--format=%ct", "--", path.name], path.parent)
    return int(out) if out else None


def commit_time(commit: str, cwd: Path) -> int | None:
    out = git(["show", "-s", "--format=%ct", commit], cwd)
    return int(out) if out else None


def committed(path: Path) -> bool:
    """Whether ``path`` is committed and unchanged since (git; a checkout without git cannot register a plan)."""
    return plan_commit_time(path) is not None and not git(["status", "--porcelain", "--", path.name], path.parent)


def plan_problem(plan_file: Path, rendering: str) -> str | None:
    """Why ``plan_file`` does not register its plan (absent, not ``rendering``, the plan's rendering from code, or
    not committed as it stands), or None when it does."""
    if not plan_file.is_file():
        return f"no plan file ({plan_file.name})"
    if plan_file.read_text(encoding="utf-8") != rendering:
        return "the plan file differs from its plan's rendering (attnlab findings --write-plans, then commit)"
    return None if committed(plan_file) else "the plan file is not committed"


def refusal(result: QuestionResult, plan: Mapping[str, Any] | None, plan_file: Path, rendering: str) -> str | None:
    """Why ``result`` (a confirmatory set's) may not be headlined, or None when it may; ``rendering``: the plan's
    rendering from code (``ablations.catalog.plans.text``), which the committed file must equal."""
    if plan is None:
        return f"refused: no plan file ({plan_file.name})"
    planned = (plan.get("preset") or {}).get("flags") or []
    if list(result.quick) != list(planned):
        return "refused: the runs' preset differs from the plan's"
    if problem := plan_problem(plan_file, rendering):
        return f"refused: {problem}"
    registered = plan_commit_time(plan_file) or 0  # committed: plan_problem said so
    times = [commit_time(c, plan_file.parent) for c in result.commits]
    if not times or any(t is None for t in times):
        return "refused: the runs' commit is not recorded or not in this repository"
    if registered > min(t for t in times if t is not None):
        return "refused: the plan was committed after the commit its runs record"
    return None


def headline(result: QuestionResult | None, plan: Mapping[str, Any] | None, plan_file: Path, rendering: str) -> str:
    """The table's headline cell: the confirmatory answer, a refusal, or ``PENDING``."""
    if result is None:
        return PENDING
    return refusal(result, plan, plan_file, rendering) or verdict_word(result.verdict)


def change_rows(names: Sequence[str], old: Mapping[str, QuestionResult], new: Mapping[str, str],
                plans: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """The README's change table: question, old headline (main exploratory seeds), new headline, why."""
    rows = ["| question | old headline (main seeds, exploratory) | new headline (confirmatory) | why it may differ "
            "(rule, selection, claim, preset or seeds) |", "|---|---|---|---|"]
    for name in names:
        was = verdict_word(old[name].verdict) if name in old else "not run"
        why = ((plans.get(name) or {}).get("changes") or "no plan").replace("|", "\\|")
        rows.append(f"| [{name}](#{name}) | {was} | {new.get(name, PENDING)} | {why} |")
    return rows
