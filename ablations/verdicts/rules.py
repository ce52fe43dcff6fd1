"""Verdict building blocks: a claim is a list of checks, each answered from per-seed intervals.

A check compares two arms (paired by seed, ``ablations.verdicts.stats.compare``) or holds an arm against a
threshold; it answers "supported", "not supported" or "inconclusive (<why>)". A question's
verdict joins its checks: supported when every check is, not supported when one clearly goes the
other way, otherwise inconclusive, and "not shown at this scale" when the arms that should
learn the task did not (then nothing learned is never read as "not supported"). A comparison the
question names as beyond the quick scale (``at_scale``, with the reason) answers "not shown at this
scale" when its difference is within seed noise; a question whose other checks are all supported then
reads "supported where shown".
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ablations.verdicts.ranges import is_count, metric_range
from ablations.verdicts.stats import MAX_SEEDS, POWER, Goal, Stat, compare, seeds_for_power

Arm = tuple[Any, ...]
ArmStats = Mapping[Arm, Mapping[str, Stat]]
Answer = Literal["supported", "not supported", "inconclusive", "not shown at this scale"]


RESOLVE = "about {n} seeds would resolve the observed difference at {power:.0%} power"
"""How a check's text says how many seeds its observed difference needs (``Check.needs``; read back by
``needs_in``)."""
NO_COUNT = "no count up to {most:,} seeds would resolve the observed difference at {power:.0%} power"
_NEEDS = re.compile(re.escape(RESOLVE).replace(r"\{n\}", r"(\d+)").replace(r"\{power:\.0%\}", r"\d+%"))
_CLAIM = re.compile(r"^(.*?): (?:inconclusive|not shown at this scale) \(")


def needs_in(verdict: str) -> list[tuple[str, int]]:
    """(claim, seeds) for each check of a verdict line (``join``) whose text says how many seeds would resolve it."""
    found = []
    for part in verdict.partition(": ")[2].split(" | "):  # after the overall answer, one part per check
        if (n := _NEEDS.search(part)) and (claim := _CLAIM.match(part)):
            found.append((claim[1], int(n[1])))
    return found


@dataclass(frozen=True)
class Check:
    """One part of a claim: its answer, the reason when inconclusive, and the numbers behind it.

    ``resolves``: half the width of a comparison's paired 95% interval, the smallest difference these seeds
    can tell from noise. ``needs``: the seeds that would resolve the observed difference (80% power,
    ``stats.seeds_for_power``) when it was within seed noise, 0 when no count up to ``stats.MAX_SEEDS`` would
    (a difference of about zero); None otherwise. ``spread``: the standard deviation of a paired comparison's
    differences (nan otherwise), which sizes the seeds a published difference would need (``at_scale``).
    ``control``: a precondition (e.g. equal parameter counts), not a finding; a question whose findings are
    all "not shown at this scale" answers that, whatever its controls say.
    """

    claim: str
    answer: Answer
    detail: str
    why: str = ""
    resolves: float = math.nan
    control: bool = False
    needs: int | None = None
    spread: float = math.nan

    def text(self) -> str:
        power = f"; {RESOLVE.format(n=self.needs, power=POWER)}" if self.needs else (
            f"; {NO_COUNT.format(most=MAX_SEEDS, power=POWER)}" if self.needs == 0 else "")
        why = f" ({self.why}{power})" if self.why else ""
        return f"{self.claim}: {self.answer}{why} — {self.detail}"


def name(arm: Arm) -> str:
    return "/".join(map(str, arm))


def get(stats: ArmStats, arm: Arm, metric: str) -> Stat | None:
    s = stats.get(arm, {}).get(metric)
    return s if s is not None and s.n > 0 else None


def _pair_detail(metric: str, a: Arm, sa: Stat, b: Arm, sb: Stat, comparison: str) -> str:
    """``metric: a <stat> vs b <stat>; <comparison>``, each interval clipped to the metric's range."""
    bounds, count = metric_range(metric), is_count(metric)
    return (f"{metric}: {name(a)} {sa.text(bounds=bounds, count=count)} vs {name(b)} "
            f"{sb.text(bounds=bounds, count=count)}; {comparison}")


def better(
    stats: ArmStats,
    a: Arm,
    b: Arm,
    *,
    metric: str,
    goal: Goal,
    claim: str | None = None,
    floor: float = 0.0,
    metric_b: str | None = None,
    negligible: float = 0.0,
) -> Check:
    """Check that arm ``a`` beats arm ``b`` on ``metric`` (b read on ``metric_b`` if given), paired by seed.

    Supported when the 95% interval of the difference lies above ``floor``; not supported when it lies
    below zero, or inside ±``negligible`` (an effect too small to matter, measured precisely);
    otherwise inconclusive (n too small, or the difference is within seed noise).
    """
    claim = claim or f"{name(a)} beats {name(b)} on {metric}"
    sa, sb = get(stats, a, metric), get(stats, b, metric_b or metric)
    missing = [name(x) for x, s in ((a, sa), (b, sb)) if s is None]
    if missing:
        return Check(
            claim, "inconclusive", f"{metric}: no finished seed", why=f"no finished seed for {', '.join(missing)}"
        )
    cmp = compare(sa, sb, goal=goal)
    detail = _pair_detail(metric, a, sa, b, sb, cmp.text(bounds=metric_range(metric), count=is_count(metric)))
    outcome = cmp.outcome(floor=floor)
    if outcome == "better":
        return Check(claim, "supported", detail)
    if outcome == "worse":
        return Check(claim, "not supported", detail)
    if outcome != "n too small" and negligible > 0 and -negligible < cmp.lo and cmp.hi < negligible:
        return Check(claim, "not supported", detail + f"; |Δ| < {negligible:g} (negligible)")
    return Check(
        claim,
        "inconclusive",
        detail,
        why=outcome if outcome == "n too small" else "difference within seed noise",
        resolves=(cmp.hi - cmp.lo) / 2,
        needs=None if outcome == "n too small" else seeds_for_power(cmp.effect, paired=cmp.paired) or 0,
        spread=cmp.spread if cmp.paired else math.nan,
    )


def similar(stats: ArmStats, a: Arm, b: Arm, *, metric: str, margin: float, claim: str | None = None) -> Check:
    """Check that ``a`` and ``b`` agree within ``margin``: the paired 95% interval lies inside ±margin."""
    claim = claim or f"{name(a)} ≈ {name(b)} on {metric} (within ±{margin})"
    sa, sb = get(stats, a, metric), get(stats, b, metric)
    if sa is None or sb is None:
        return Check(claim, "inconclusive", f"{metric}: no finished seed", why="n too small")
    cmp = compare(sa, sb, goal="maximize")
    detail = _pair_detail(metric, a, sa, b, sb, cmp.text(bounds=metric_range(metric), count=is_count(metric)))
    if cmp.n < 2 or not math.isfinite(cmp.lo):
        return Check(claim, "inconclusive", detail, why="n too small")
    if -margin <= cmp.lo and cmp.hi <= margin:
        return Check(claim, "supported", detail)
    if cmp.lo > margin or cmp.hi < -margin:
        return Check(claim, "not supported", detail)
    return Check(claim, "inconclusive", detail, why="interval wider than the margin (seed noise)")


def at_most(stats: ArmStats, arm: Arm, *, metric: str, bound: float, claim: str) -> Check:
    """Check that ``arm``'s mean of ``metric`` is at most ``bound`` (n ≥ 2).

    Supported when the 95% interval of the mean lies at or below the bound, not supported when it lies above
    it, inconclusive when it straddles the bound (the seeds cannot tell which side the mean is on).
    """
    return _bound(stats, arm, metric=metric, bound=bound, claim=claim, upper=True)


def at_least(stats: ArmStats, arm: Arm, *, metric: str, bound: float, claim: str) -> Check:
    """Check that ``arm``'s mean of ``metric`` is at least ``bound`` (n ≥ 2; see ``at_most``)."""
    return _bound(stats, arm, metric=metric, bound=bound, claim=claim, upper=False)


def _bound(stats: ArmStats, arm: Arm, *, metric: str, bound: float, claim: str, upper: bool) -> Check:
    s = get(stats, arm, metric)
    if s is None:
        return Check(claim, "inconclusive", f"{metric}: no finished seed", why=f"no finished seed for {name(arm)}")
    shown = s.text(bounds=metric_range(metric), count=is_count(metric))
    detail = f"{metric}: {name(arm)} {shown} ({'≤' if upper else '≥'} {bound:g} wanted)"
    lo, hi = s.ci95
    if s.n < 2 or not (math.isfinite(lo) and math.isfinite(hi)):
        return Check(claim, "inconclusive", detail, why="n too small")
    if lo < bound < hi:  # the seeds that would place the mean on one side: a one-sample t test against the bound
        return Check(claim, "inconclusive", detail, why="the 95% interval straddles the bound",
                     resolves=(hi - lo) / 2, needs=seeds_for_power((s.mean - bound) / s.std, paired=True) or 0)
    within = hi <= bound if upper else lo >= bound
    return Check(claim, "supported" if within else "not supported", detail)


def learned(
    stats: ArmStats, arms: Sequence[Arm], *, metric: str, threshold: float, goal: Goal, shows_at: str
) -> Check | None:
    """None when the best of ``arms`` learned (reached ``threshold``); else a "not shown at this scale" check."""
    sign = 1.0 if goal == "maximize" else -1.0
    means = {a: s.mean for a in arms if (s := get(stats, a, metric)) is not None}
    if not means:
        return Check("the task is learned", "inconclusive", f"{metric}: no finished seed", why="n too small")
    best = max(means, key=lambda a: sign * means[a])
    if sign * (means[best] - threshold) >= 0:
        return None
    return Check(
        "the task is learned",
        "not shown at this scale",
        f"best arm {name(best)} reaches {metric} {means[best]:.3f}, short of {threshold:g}",
        why=f"nothing learned at this scale; expected to show at {shows_at}",
    )


def at_scale(check: Check, why: str, *, published: float | None = None) -> Check:
    """``check``, or "not shown at this scale" with ``why`` when its difference is within seed noise.

    For comparisons whose effect the question expects to be too small to resolve at the quick scale (``why``
    says why, and where it should show). Supported, not supported and "n too small" answers are kept.
    ``published``: the literature's difference in this metric's units, when the question can state one; the
    answer then also says how many seeds would resolve it at these seeds' spread (80% power, paired).
    """
    if check.answer != "inconclusive" or check.why != "difference within seed noise":
        return check
    noise = f"within seed noise at this scale (these seeds resolve about ±{check.resolves:.3g})"
    return Check(check.claim, "not shown at this scale", check.detail,
                 why=f"{noise}; {why}{_published(check, published)}", needs=check.needs, spread=check.spread)


def _published(check: Check, published: float | None) -> str:
    """``; the published difference of X would need about N seeds ...`` (empty without a number or a spread)."""
    if published is None or not (math.isfinite(check.spread) and check.spread > 0):
        return ""
    n = seeds_for_power(published / check.spread, paired=True)
    count = f"about {n} seeds" if n else f"more than {MAX_SEEDS:,} seeds"
    return f"; the published difference of {published:g} would need {count} at {POWER:.0%} power at these seeds' spread"


def join(checks: Sequence[Check], gate: Check | None = None) -> str:
    """One verdict line: the overall answer, then every check with its numbers."""
    if gate is not None:
        return f"{gate.answer}: {gate.detail} ({gate.why})"
    answers = [c.answer for c in checks]
    if answers and all(a == "supported" for a in answers):
        head = "supported"
    elif "not supported" in answers:
        head = "not supported"
    elif answers and set(answers) <= {"supported", "not shown at this scale"}:
        findings = [c.answer for c in checks if not c.control] or answers
        unshown = findings.count("not shown at this scale")
        head = "not shown at this scale" if unshown == len(findings) else (
            f"supported where shown ({len(findings) - unshown} of {len(findings)} findings; "
            f"{unshown} not shown at this scale)")
    else:
        whys = sorted({c.why for c in checks if c.answer == "inconclusive" and c.why})
        head = f"inconclusive ({'; '.join(whys) or 'no checks'})"
    return head + ": " + " | ".join(c.text() for c in checks)


def verdict_word(line: str) -> str:
    """The leading answer of a verdict line (supported / supported where shown / not supported / inconclusive /
    not shown at this scale)."""
    words = ("not shown at this scale", "not supported", "supported where shown", "supported", "inconclusive",
             "no verdict")
    for word in words:
        if line.startswith(word):
            return word
    return line.split(":", 1)[0]
