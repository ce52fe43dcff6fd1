"""Verdict building blocks: a claim is a list of checks, each answered from per-seed intervals.

A check compares two arms (paired by seed, ``ablations.verdicts.stats.compare``) or holds an arm against a
threshold; it answers "supported", "not supported" or "inconclusive (<why>)". The 95% interval decides
(never the sign-flip p; ``stats.Comparison.disagreement`` says when the two disagree), read for its sign and
its size: "beats" needs the interval above the comparison's smallest effect of interest (``better``), "≈" is
an equivalence test against a stated margin (``similar``), and a wrong sign is "inconclusive (wrong sign)"
within noise and "not supported" clear of it. A question's verdict joins its checks: supported when every
check is, not supported when one clearly goes the other way, otherwise inconclusive, and "not shown at this
scale" when the arms that should learn the task did not (then nothing learned is never read as "not
supported"). A comparison the question names as beyond the quick scale (``at_scale``, with the reason) answers
"not shown at this scale" only when its point estimate has the claimed sign; a question whose other checks
are all supported then reads "supported where shown". Secondary checks are listed after the main claim and
never change its answer (``secondary``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ablations.verdicts.ranges import is_count, metric_range
from ablations.verdicts.stats import MAX_SEEDS, POWER, Goal, Stat, compare, seeds_for_power

Arm = tuple[Any, ...]
ArmStats = Mapping[Arm, Mapping[str, Stat]]
Answer = Literal["supported", "not supported", "inconclusive", "not shown at this scale"]
Reason = Literal["", "noise", "straddles", "wrong sign"]
"""Why a comparison is inconclusive, for the rules that read it (``at_scale``): within seed noise, above zero but
straddling the smallest effect of interest, or the wrong sign within noise; "" for any other answer or reason."""


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


NOISE = "difference within seed noise"
STRADDLES = "the interval straddles the smallest effect of interest"
WRONG_SIGN = "the wrong sign, within seed noise"
_RECORD: ContextVar[list[Check] | None] = ContextVar("checks_made", default=None)


@contextmanager
def recording() -> Iterator[list[Check]]:
    """Collect every ``Check`` built inside the block (the plan renders its comparisons from them)."""
    made: list[Check] = []
    token = _RECORD.set(made)
    try:
        yield made
    finally:
        _RECORD.reset(token)


@dataclass(frozen=True)
class Check:
    """One part of a claim: its answer, the reason when inconclusive, and the numbers behind it.

    ``resolves``: half the width of a comparison's paired 95% interval, the smallest difference these seeds
    can tell from noise. ``needs``: the seeds that would resolve the observed difference (80% power,
    ``stats.seeds_for_power``) when it was within seed noise, 0 when no count up to ``stats.MAX_SEEDS`` would
    (a difference of about zero); None otherwise. ``spread``: the standard deviation of a paired comparison's
    differences (nan otherwise), which sizes the seeds a published difference would need (``at_scale``).
    ``control``: a precondition (e.g. equal parameter counts), not a finding; a question whose findings are
    all "not shown at this scale" answers that, whatever its controls say. ``sign``: the point estimate in the
    claimed direction (positive: the claimed sign; nan: no comparison). ``secondary``: listed after the main
    claim and never part of its answer (``join``). ``spec``: what the check tests (kind, arms, metric,
    direction, smallest effect of interest, margin, bound), which the question's plan renders. ``reason``: why a
    comparison is inconclusive, structured (``Reason``; ``why`` is its text).
    """

    claim: str
    answer: Answer
    detail: str
    why: str = ""
    resolves: float = math.nan
    control: bool = False
    needs: int | None = None
    spread: float = math.nan
    sign: float = math.nan
    secondary: bool = False
    reason: Reason = ""
    spec: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        made = _RECORD.get()
        if made is not None and self.spec:
            made.append(self)

    def text(self) -> str:
        power = f"; {RESOLVE.format(n=self.needs, power=POWER)}" if self.needs else (
            f"; {NO_COUNT.format(most=MAX_SEEDS, power=POWER)}" if self.needs == 0 else "")
        why = f" ({self.why}{power})" if self.why else ""
        return f"{self.claim}: {self.answer}{why} — {self.detail}"


def secondary(check: Check) -> Check:
    """``check`` marked secondary: shown beneath the main claim, not part of its answer."""
    return replace(check, secondary=True)


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
    sesoi: float | None = None,
    claim: str | None = None,
    metric_b: str | None = None,
) -> Check:
    """Check that arm ``a`` beats arm ``b`` on ``metric`` by at least ``sesoi`` (b read on ``metric_b`` if given).

    ``sesoi``: the smallest effect of interest, in the metric's units, which every registered question declares
    for every comparison (``tests/ablations/test_plans.py`` refuses None; 0: any difference of the claimed sign
    counts; None reads as 0 for a verdict on hand-made statistics). One test decides, the paired 95%
    interval of the difference (``stats.compare``):

    * above ``sesoi`` (above zero when it is 0): supported;
    * below zero: not supported (the wrong sign, clear of seed noise);
    * inside ±``sesoi``: not supported (an effect too small to matter, measured precisely);
    * otherwise inconclusive: the wrong sign within noise (``WRONG_SIGN``), above zero but straddling the
      smallest effect of interest, or within seed noise (with the seeds that would resolve it).
    """
    claim = claim or f"{name(a)} beats {name(b)} on {metric}"
    spec = {"kind": "beats", "a": name(a), "b": name(b), "metric": metric, "direction": goal, "sesoi": sesoi,
            **({"metric_b": metric_b} if metric_b else {})}
    sa, sb = get(stats, a, metric), get(stats, b, metric_b or metric)
    missing = [name(x) for x, s in ((a, sa), (b, sb)) if s is None]
    if missing:
        return Check(claim, "inconclusive", f"{metric}: no finished seed",
                     why=f"no finished seed for {', '.join(missing)}", spec=spec)
    cmp = compare(sa, sb, goal=goal)
    detail = _pair_detail(metric, a, sa, b, sb, cmp.text(bounds=metric_range(metric), count=is_count(metric)))
    least = sesoi or 0.0
    kept = {"sign": cmp.diff, "spec": spec}
    if cmp.n < 2 or not math.isfinite(cmp.lo):
        return Check(claim, "inconclusive", detail, why="n too small", **kept)
    if cmp.lo > least:
        return Check(claim, "supported", detail, **kept)
    if cmp.hi < 0:
        return Check(claim, "not supported", detail + "; the wrong sign, its interval clear of zero", **kept)
    if least > 0 and -least < cmp.lo and cmp.hi < least:
        return Check(claim, "not supported", detail + f"; |Δ| < {least:g} (below the smallest effect of interest)",
                     **kept)
    noisy = {"resolves": (cmp.hi - cmp.lo) / 2, "spread": cmp.spread if cmp.paired else math.nan}
    if cmp.diff < 0:
        return Check(claim, "inconclusive", detail, why=WRONG_SIGN, reason="wrong sign", **noisy, **kept)
    reason: Reason = "straddles" if cmp.lo > 0 else "noise"
    why = f"{STRADDLES} ({least:g})" if reason == "straddles" else NOISE
    needs = seeds_for_power((cmp.diff - least) / cmp.spread, paired=cmp.paired) if cmp.spread > 0 else None
    return Check(claim, "inconclusive", detail, why=why, reason=reason, needs=needs or 0, **noisy, **kept)


def similar(stats: ArmStats, a: Arm, b: Arm, *, metric: str, margin: float, claim: str | None = None) -> Check:
    """Check that ``a`` and ``b`` agree within ±``margin``: two one-sided tests at 5% (Schuirmann 1987), i.e. the
    90% interval of the paired difference lies inside ±margin. Not supported when that interval lies wholly
    outside the margin; inconclusive when it leaves the margin on one side (equivalence not shown)."""
    claim = claim or f"{name(a)} ≈ {name(b)} on {metric} (within ±{margin})"
    spec = {"kind": "equivalent", "a": name(a), "b": name(b), "metric": metric, "margin": margin,
            "test": "two one-sided tests at 5% (90% interval inside ±margin)"}
    sa, sb = get(stats, a, metric), get(stats, b, metric)
    if sa is None or sb is None:
        return Check(claim, "inconclusive", f"{metric}: no finished seed", why="n too small", spec=spec)
    cmp = compare(sa, sb, goal="maximize")
    detail = _pair_detail(metric, a, sa, b, sb, cmp.text(bounds=metric_range(metric), count=is_count(metric)))
    if cmp.n < 2 or not math.isfinite(cmp.lo90):
        return Check(claim, "inconclusive", detail, why="n too small", spec=spec)
    detail += f"; 90% interval [{cmp.lo90:+.3f}, {cmp.hi90:+.3f}] against ±{margin:g}"
    if -margin <= cmp.lo90 and cmp.hi90 <= margin:
        return Check(claim, "supported", detail, spec=spec)
    if cmp.lo90 > margin or cmp.hi90 < -margin:
        return Check(claim, "not supported", detail, spec=spec)
    return Check(claim, "inconclusive", detail, why=f"the 90% interval leaves ±{margin:g}: equivalence not shown",
                 spec=spec)


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
    spec = {"kind": "at most" if upper else "at least", "a": name(arm), "metric": metric, "bound": bound}
    s = get(stats, arm, metric)
    if s is None:
        return Check(claim, "inconclusive", f"{metric}: no finished seed", why=f"no finished seed for {name(arm)}",
                     spec=spec)
    shown = s.text(bounds=metric_range(metric), count=is_count(metric))
    detail = f"{metric}: {name(arm)} {shown} ({'≤' if upper else '≥'} {bound:g} wanted)"
    lo, hi = s.ci95
    sign = (bound - s.mean) if upper else (s.mean - bound)
    if s.n < 2 or not (math.isfinite(lo) and math.isfinite(hi)):
        return Check(claim, "inconclusive", detail, why="n too small", sign=sign, spec=spec)
    if lo < bound < hi:  # the seeds that would place the mean on one side: a one-sample t test against the bound
        return Check(claim, "inconclusive", detail, why="the 95% interval straddles the bound", sign=sign, spec=spec,
                     resolves=(hi - lo) / 2, needs=seeds_for_power((s.mean - bound) / s.std, paired=True) or 0)
    within = hi <= bound if upper else lo >= bound
    return Check(claim, "supported" if within else "not supported", detail, sign=sign, spec=spec)


def learned(
    stats: ArmStats, arms: Sequence[Arm], *, metric: str, threshold: float, goal: Goal, shows_at: str
) -> Check | None:
    """None when the best of ``arms`` learned (reached ``threshold``); else a "not shown at this scale" check."""
    spec = {"kind": "learned gate", "arms": [name(a) for a in arms], "metric": metric, "threshold": threshold,
            "direction": goal}
    Check("the task is learned", "supported", "", spec=spec)  # recorded for the plan; the gate reads no seeds
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
    """``check``, or "not shown at this scale" with ``why`` when its point estimate has the claimed sign and its
    interval does not clear the smallest effect of interest (within seed noise, or straddling it).

    For comparisons whose effect the question expects to be too small to resolve at the quick scale (``why``
    says why, and where it should show). A wrong sign is never relabelled: within noise it stays
    "inconclusive (wrong sign)", clear of noise "not supported". Supported, not supported and "n too small"
    answers are kept. ``published``: the literature's difference in this metric's units, when the question can
    state one; the answer then also says how many seeds would resolve it at these seeds' spread (80% power,
    paired).
    """
    if check.answer != "inconclusive" or check.reason not in ("noise", "straddles") or not check.sign > 0:
        return check
    resolves = f"these seeds resolve about ±{check.resolves:.3g}"
    shown = (f"within seed noise at this scale ({resolves})" if check.reason == "noise" else
             f"above zero, but {check.why} at this scale ({resolves})")
    return replace(check, answer="not shown at this scale", why=f"{shown}; {why}{_published(check, published)}")


def _published(check: Check, published: float | None) -> str:
    """``; the published difference of X would need about N seeds ...`` (empty without a number or a spread)."""
    if published is None or not (math.isfinite(check.spread) and check.spread > 0):
        return ""
    n = seeds_for_power(published / check.spread, paired=True)
    count = f"about {n} seeds" if n else f"more than {MAX_SEEDS:,} seeds"
    return f"; the published difference of {published:g} would need {count} at {POWER:.0%} power at these seeds' spread"


def head_of(checks: Sequence[Check]) -> str:
    """The overall answer of ``checks``: inconclusive when a control failed (a broken precondition refutes
    nothing), supported when every one is, not supported when one is, "supported where shown" when the rest are
    "not shown at this scale" (never with a wrong sign, which is inconclusive or not supported), otherwise
    inconclusive with the reasons."""
    failed = [c.claim for c in checks if c.control and c.answer == "not supported"]
    if failed:
        return f"inconclusive (control failed: {'; '.join(failed)})"
    answers = [c.answer for c in checks]
    if answers and all(a == "supported" for a in answers):
        return "supported"
    if "not supported" in answers:
        return "not supported"
    if answers and set(answers) <= {"supported", "not shown at this scale"}:
        findings = [c.answer for c in checks if not c.control] or answers
        unshown = findings.count("not shown at this scale")
        return "not shown at this scale" if unshown == len(findings) else (
            f"supported where shown ({len(findings) - unshown} of {len(findings)} findings; "
            f"{unshown} not shown at this scale)")
    whys = sorted({c.why for c in checks if c.answer == "inconclusive" and c.why})
    return f"inconclusive ({'; '.join(whys) or 'no checks'})"


BOUNDS = ("at most", "at least")
"""Check kinds that hold one arm against a threshold: an arm that learned nothing misses them by the gate's own
reason, so their sign never overrules a gate (``gate_holds``)."""


def gate_holds(gate: Check | None, main: Sequence[Check]) -> bool:
    """Whether ``gate`` (a precondition such as "the task is learned") answers the question: it fired, and when it
    says "not shown at this scale", no main comparison has the wrong sign (a wrong sign is judged as measured)."""
    if gate is None:
        return False
    wrong = [c for c in main if c.sign < 0 and c.spec.get("kind") not in BOUNDS]
    return gate.answer != "not shown at this scale" or not wrong


def join(checks: Sequence[Check], gate: Check | None = None) -> str:
    """One verdict line: the main claim's answer, then every check with its numbers; secondary checks
    (``secondary``) follow after "secondary:" and never change the answer.

    ``gate``: a precondition that failed (``learned``, or a question's own). When it holds (``gate_holds``) its
    answer heads the line, followed by its reading and every check; when a main check has the wrong sign the
    checks' own answer heads the line and the gate is listed as a check."""
    main = [c for c in checks if not c.secondary]
    extra = [c for c in checks if c.secondary]
    tail = f" || secondary ({head_of(extra).split(' (')[0]}): " + " | ".join(c.text() for c in extra) if extra else ""
    parts = [c.text() for c in main]
    if gate is not None and gate_holds(gate, main):
        return f"{gate.answer}: " + " | ".join([f"{gate.detail} ({gate.why})", *parts]) + tail
    if gate is not None:
        parts.insert(0, gate.text())
    return head_of(main) + ": " + " | ".join(parts) + tail


def verdict_word(line: str) -> str:
    """The leading answer of a verdict line (supported / supported where shown / not supported / inconclusive /
    not shown at this scale)."""
    words = ("not shown at this scale", "not supported", "supported where shown", "supported", "inconclusive",
             "no verdict")
    for word in words:
        if line.startswith(word):
            return word
    return line.split(":", 1)[0]
