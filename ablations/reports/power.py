"""More seeds where a comparison sits at the seeds' resolution (``attnlab findings --power``; issue #26).

A comparison that comes out within seed noise says how many seeds would resolve the difference it observed
(``ablations.verdicts.rules.Check.needs``: 80% power, ``ablations.verdicts.stats.seeds_for_power``). Adding seeds to the
same set until an interval clears its bound is optional stopping: the interval's 95% no longer holds. So the
extra seeds are a third set, disjoint from the others (``FIRST_SEED``, ``FIRST_SEED + 1``, ...), whose size
is fixed before any of it trains and read on its own, never pooled:

1. ``make_plan`` reads each question's saved verdicts on the main and the replication seeds and, per
   question, takes the largest seed count any of its within-noise comparisons needs, up to ``CAP``. A
   question whose answer is "not shown at this scale" on both sets is left out (its claim is beyond this
   scale: more seeds at it do not change the answer), and so is a comparison that needs more than ``CAP``
   seeds (the README says how many it would need).
2. The plan is written once, to ``<out>/power/plan.json``, and read back on every later call: resuming or
   re-reporting never changes n, whatever the seeds already run say.
3. The planned questions train on their n fresh seeds under ``<root>/power`` and report under
   ``<out>/power``; the README's "more seeds" column gives that set's own answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ablations.reports.record import QuestionResult, stamp
from ablations.verdicts.rules import needs_in, verdict_word

FIRST_SEED = 2001
SUBDIR = "power"
PLAN = "plan.json"
CAP = 16
"""The most seeds a question's third set gets: about three times the main set's five. At the cap the dearest
question (scaling: 3 arms, ~136 s a trial) takes about 55 minutes of two CPU cores."""
BEYOND_SCALE = "not shown at this scale"
SCALE_WHY = "not shown at this scale on every seed set: the claim is beyond this scale"


def _question_plan(results: Sequence[QuestionResult | None]) -> dict[str, Any]:
    """One question's entry: ``seeds`` (0: none planned), ``because`` and ``beyond`` (claim: seeds, set)."""
    sets = [(label, r) for label, r in zip(("main", "replication"), results, strict=True) if r is not None]
    if sets and all(verdict_word(r.verdict) == BEYOND_SCALE for _, r in sets):
        return {"seeds": 0, "why": SCALE_WHY, "because": [], "beyond": _needs(sets, lambda n: True)}
    because, beyond = _needs(sets, lambda n: n <= CAP), _needs(sets, lambda n: n > CAP)
    seeds = max((c["seeds"] for c in because), default=0)
    why = "" if seeds else ("every within-noise comparison needs more than the cap" if beyond
                            else "no comparison within seed noise says how many seeds would resolve it")
    return {"seeds": seeds, "why": why, "because": because, "beyond": beyond}


def _needs(sets: Sequence[tuple[str, QuestionResult]], keep: Any) -> list[dict[str, Any]]:
    return [{"claim": claim, "seeds": n, "set": label}
            for label, r in sets for claim, n in needs_in(r.verdict) if keep(n)]


def make_plan(main: Mapping[str, QuestionResult], again: Mapping[str, QuestionResult]) -> dict[str, Any]:
    """The plan for every question with a saved result on either set (``main`` and ``again``, by name)."""
    from attnlab_core.repo import git

    names = [*main, *(n for n in again if n not in main)]
    return {
        "declared": stamp(),
        "commit": git(["rev-parse", "HEAD"], Path.cwd()) or "",
        "cap": CAP,
        "first_seed": FIRST_SEED,
        "rule": "n = the most seeds any within-noise comparison of the question needs (80% power, observed "
                f"difference, either earlier seed set), at most {CAP}; fresh seeds {FIRST_SEED}.., read alone",
        "questions": {n: _question_plan([main.get(n), again.get(n)]) for n in names},
    }


def read_plan(out: Path) -> dict[str, Any] | None:
    """The plan saved under ``out/power``, or None."""
    path = out / SUBDIR / PLAN
    return json.loads(path.read_text()) if path.is_file() else None


def load_or_make_plan(out: Path, main: Mapping[str, QuestionResult], again: Mapping[str, QuestionResult], *,
                      write: bool = True) -> tuple[dict[str, Any], bool]:
    """(the plan under ``out/power``, whether it was made now); made only when absent, and then written there
    unless ``write`` is false (a dry run)."""
    saved = read_plan(out)
    if saved is not None:
        return saved, False
    plan = make_plan(main, again)
    if write:
        path = out / SUBDIR / PLAN
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(plan, indent=2) + "\n")
    return plan, True


def _entry(plan: Mapping[str, Any] | None, name: str) -> dict[str, Any] | None:
    return ((plan or {}).get("questions") or {}).get(name)


def planned_seeds(plan: Mapping[str, Any], name: str) -> list[int]:
    """The fresh seeds the plan gives a question (empty: not planned)."""
    n = int((_entry(plan, name) or {}).get("seeds") or 0)
    start = int(plan.get("first_seed", FIRST_SEED))
    return list(range(start, start + n))


def cell(plan: Mapping[str, Any] | None, name: str, result: QuestionResult | None) -> str:
    """The README's "more seeds" cell: the third set's answer, what is planned, or what it would need."""
    entry = _entry(plan, name)
    if entry is None:
        return "—"
    if entry["seeds"]:
        answer = verdict_word(result.verdict) if result is not None else "planned, not run"
        return f"n={entry['seeds']}: {answer}"
    if entry["why"] == SCALE_WHY:
        return "none: claim beyond this scale"
    most = max((c["seeds"] for c in entry["beyond"]), default=None)
    return f"none: needs {most}" if most else "—"


def section_lines(plan: Mapping[str, Any] | None, name: str, result: QuestionResult | None,
                  provenance: str) -> list[str]:
    """The question section's lines for the third set (none when the question has no plan entry)."""
    entry = _entry(plan, name)
    if plan is None or entry is None:
        return []
    lines = []
    if entry["seeds"]:
        seeds = planned_seeds(plan, name)
        why = "; ".join(f"{c['claim']}: {c['seeds']} ({c['set']} seeds)" for c in entry["because"])
        fixed = f"fixed in [power/{PLAN}](power/{PLAN}) on {plan.get('declared')} before any of them ran"
        head = (f"- **More seeds, exploratory** ({len(seeds)} fresh seeds, {seeds[0]}-{seeds[-1]}, {fixed}; "
                f"needed by {why}): ")
        lines.append(head + (f"{result.verdict} ({provenance}; [report](power/{result.report}))" if result
                             else "planned, not run yet"))
    if entry["beyond"]:
        why = entry["why"] if entry["why"] == SCALE_WHY else f"more than the cap of {plan.get('cap', CAP)}"
        lines.append(f"- **Seeds a within-noise comparison would need** (80% power for the difference observed; not "
                     f"run: {why}): " + "; ".join(f"{c['claim']}: about {c['seeds']} ({c['set']} seeds)"
                                                  for c in entry["beyond"]))
    return lines

