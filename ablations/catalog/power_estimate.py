"""The confirmatory seed count of a plan, from a power estimate on the exploratory seeds (issue #42).

The exploratory answers are read as they stand on record at ``EXPLORATORY_COMMIT`` (``git show``), so a later
rerun of an exploratory set cannot move a registered count. For each comparison of the plan that an exploratory
check measured (same metric and arms), the estimate reads the observed difference Δ and its paired effect size
d (so the spread of the differences is Δ/d) and asks how many seeds would put the 95% interval above the
comparison's smallest effect of interest with 80% power: ``stats.seeds_for_power((Δ - sesoi) / spread)``. A
bound check (at least / at most) reads the arm's mean and standard deviation against its bound the same way.
An equivalence (two one-sided tests, ``rules.similar``) asks how many seeds would put the 90% interval inside
±margin, i.e. resolve margin − |Δ| (Schuirmann 1987); ``seeds_for_power``'s two-sided 95% critical value stands
in for the one-sided 95% one, so the count is slightly conservative. A comparison whose observed Δ is not
beyond its smallest effect of interest (or not inside the margin) cannot be powered by any count and is listed
as such; other kinds (extrapolates, closer) are not estimated. The question's count is the largest count any of
its main (not secondary) comparisons needs over every exploratory set, between ``LEAST`` and ``MOST``; where no
main comparison was powered the count is the floor ``LEAST`` and the plan says so (``count_from``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ablations.verdicts.stats import seeds_for_power
from attnlab_core.repo import git

EXPLORATORY_COMMIT = "0367f32"
"""The commit whose docs/findings hold the exploratory answers the counts are estimated from."""
LEAST, MOST = 5, 20
"""Fewest confirmatory seeds (the exploratory sets' size) and the most a question is given (two CPU cores)."""
SETS = ("", "replication", "power")

_PAIR = re.compile(r"— (?P<metric>[^:|]+): (?P<a>\S+) [^|]*? vs (?P<b>\S+) [^|]*?; Δ=(?P<diff>[+-][\d.]+) "
                   r"\[[^\]]*\] \((?:un)?paired, n=\d+(?:, p=[\d.]+)?, d=(?P<d>-?[\d.]+|-?∞)")
_BOUND = re.compile(r"— (?P<metric>[^:|]+): (?P<a>\S+) (?P<mean>-?[\d.]+) ± (?P<std>[\d.]+)[^|(]*"
                    r"\((?P<op>[≤≥]) (?P<bound>-?[\d.e+-]+) wanted\)")


def exploratory_verdicts(name: str, *, real: bool, root: Path) -> dict[str, str]:
    """Seed set ("main", "replication", "power") -> the verdict on record at ``EXPLORATORY_COMMIT``."""
    base = "docs/findings/real" if real else "docs/findings"
    found = {}
    for sub in SETS:
        text = git(["show", f"{EXPLORATORY_COMMIT}:" + "/".join(p for p in (base, sub, name, "result.json") if p)],
                   root)
        if text:
            found[sub or "main"] = json.loads(text)["verdict"]
    return found


def _observed(verdict: str) -> Iterable[tuple[tuple[str, str, str], float, float]]:
    """((metric, a, b or bound kind), signed effect numerator, spread) of each check in a verdict line."""
    for m in _PAIR.finditer(verdict):
        diff, d = float(m["diff"]), m["d"].replace("∞", "inf")
        spread = abs(diff / float(d)) if float(d) not in (0.0,) else math.inf
        yield (m["metric"].strip(), m["a"], m["b"]), diff, spread
    for m in _BOUND.finditer(verdict):
        sign = 1.0 if m["op"] == "≥" else -1.0
        yield (m["metric"].strip(), m["a"], m["op"]), sign * (float(m["mean"]) - float(m["bound"])), float(m["std"])


def _key(spec: Mapping[str, Any]) -> tuple[str, str, str] | None:
    kind = spec.get("kind")
    if kind in ("beats", "equivalent"):
        return spec["metric"], spec["a"], spec["b"]
    if kind in ("at least", "at most"):
        return spec["metric"], spec["a"], "≥" if kind == "at least" else "≤"
    return None


def _numerator(spec: Mapping[str, Any], observed: float) -> float:
    """The difference the seeds must resolve: beyond the smallest effect of interest, inside the margin (an
    equivalence), or beyond the bound (a bound check's ``observed`` is already signed against its bound)."""
    if spec["kind"] == "beats":
        return observed - float(spec.get("sesoi") or 0.0)
    if spec["kind"] == "equivalent":
        return float(spec["margin"]) - abs(observed)
    return observed


def _need(numerator: float, spread: float) -> int | None:
    if numerator <= 0:
        return None
    if spread == 0 or math.isinf(numerator / spread):
        return 2
    return seeds_for_power(numerator / spread, paired=True)


def estimate(comparisons: Sequence[Mapping[str, Any]], verdicts: Mapping[str, str]) -> dict[str, Any]:
    """``{"count", "rule", "comparisons": [{claim, set: needs}]}`` for a plan's comparisons (each a dict with
    ``claim``, ``spec`` and ``secondary``) from the exploratory ``verdicts`` by seed set."""
    observed = {s: {k: (num, spread) for k, num, spread in _observed(v)} for s, v in verdicts.items()}
    rows: list[dict[str, Any]] = []
    for c in comparisons:
        key = _key(c["spec"])
        if key is None:
            continue
        row: dict[str, Any] = {}
        for s, seen in observed.items():
            if key in seen:
                num, spread = seen[key]
                n = _need(_numerator(c["spec"], num), spread)
                row[s] = n if n is not None else "not resolvable (observed effect not beyond the SESOI or margin)"
        if row:
            rows.append({"claim": c["claim"], "secondary": c["secondary"], "needs": row})
    count = min(MOST, max([LEAST, *main_needs({"comparisons": rows})]))
    rule = (f"the most seeds any main comparison needs on any exploratory set (80% power for its observed "
            f"difference beyond its smallest effect of interest, or inside its equivalence margin; "
            f"stats.seeds_for_power), between {LEAST} and {MOST}; exploratory answers as on record at commit "
            f"{EXPLORATORY_COMMIT}")
    return {"count": count, "rule": rule, "comparisons": rows}


def main_needs(power: Mapping[str, Any]) -> list[int]:
    """The seed counts an estimate (:func:`estimate`'s result, or a plan file's ``seeds.power``) found for its main
    comparisons, over every exploratory set."""
    return [n for r in power["comparisons"] if not r["secondary"] for n in r["needs"].values() if isinstance(n, int)]


def count_from(power: Mapping[str, Any]) -> str:
    """Where an estimated count came from: the power estimate, or the floor when nothing was powered."""
    if main_needs(power):
        return "power estimate"
    return f"floor ({LEAST}: no main comparison measured and resolvable on the exploratory seeds)"
