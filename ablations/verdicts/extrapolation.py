"""Extrapolation judged on the change from in range to beyond it, above chance (issue #42).

A scheme "extrapolates better" when its per-seed change from the training lengths (or context) to beyond
them is smaller than another's, paired by seed (``rise``, then ``rules.better`` on that change), never on
raw beyond-range values: an arm that is worse everywhere would otherwise look worse "beyond" by its in-range
quality alone (on lm_positions_web about 97% of ALiBi's perplexity advantage at 4L was in-range quality).
And an arm that is claimed to extrapolate must sit above chance beyond the range (its 95% interval clear of
the chance level, ``rules.at_least``/``at_most``): falling less from near chance is no extrapolation.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Literal

from ablations.verdicts.rules import Arm, ArmStats, Check, at_least, at_most, better, get, name
from ablations.verdicts.stats import Goal, Stat, stat

Change = Literal["difference", "relative", "log"]
"""How a number changes from inside to beyond the range: ``beyond - inside``, ``beyond / inside - 1``, or
``ln(beyond / inside)`` (for a perplexity the rise of the mean NLL per token, which stays on a scale seeds can
average where a perplexity multiplies by thousands)."""


def _change(inside: float, beyond: float, change: Change) -> float | None:
    """One seed's change, None where it is undefined (a ratio of a zero inside, a log of a non-positive number)."""
    if change == "difference":
        return beyond - inside
    if change == "relative":
        return beyond / inside - 1.0 if inside != 0 else None
    return math.log(beyond / inside) if beyond > 0 and inside > 0 else None


def rise(stats: ArmStats, arm: Arm, *, inside: str, beyond: str, change: Change) -> Stat | None:
    """Per seed, the ``change`` from ``inside`` to ``beyond``, on the seeds that have both (and where it is defined)."""
    a, b = get(stats, arm, inside), get(stats, arm, beyond)
    if a is None or b is None:
        return None
    at = dict(a.values)
    pairs = [(k, c) for k, v in b.values if k in at and (c := _change(at[k], v, change)) is not None]
    return stat([v for _, v in pairs], [k for k, _ in pairs]) if pairs else None


def extrapolates(stats: ArmStats, good: Arm, bad: Arm, *, inside: str, beyond: str, goal: Goal, chance: float,
                 sesoi: float, change: Change = "difference", claim: str | None = None) -> Check:
    """Check that ``good`` changes less than ``bad`` from ``inside`` to ``beyond`` by at least ``sesoi`` (in the
    change's units) and that ``good`` sits above ``chance`` beyond the range (``goal`` says which way is
    better for the metric: accuracy maximized, perplexity minimized, where "above chance" means below the
    chance perplexity).

    The answer is the change comparison's, unless ``good`` is not clear of chance beyond the range: below
    chance (interval on the wrong side) it is "not supported", straddling it "inconclusive".
    """
    claim = claim or f"{name(good)} extrapolates better than {name(bad)}"
    # a label no metric-range rule reads as a score (a change may be negative): ':' for '/'
    key = f"change {inside} -> {beyond}".replace("/", ":") + {"difference": "", "relative": " (relative)",
                                                               "log": " (log ratio)"}[change]
    changes = {a: {key: s} for a in (good, bad) if (s := rise(stats, a, inside=inside, beyond=beyond,
                                                                  change=change)) is not None}
    compared = better(changes, good, bad, metric=key, goal=goal, sesoi=sesoi, claim=claim)
    bound = at_least if goal == "maximize" else at_most
    clear = bound(stats, good, metric=beyond, bound=chance,
                  claim=f"{name(good)} is above chance beyond the range (chance {chance:g})")
    spec = {**compared.spec, "kind": "extrapolates", "inside": inside, "beyond": beyond, "chance": chance,
            "relative": change == "relative", **({"log": True} if change == "log" else {})}
    out = replace(compared, spec=spec, detail=f"{compared.detail}; beyond the range: {clear.detail}")
    if clear.answer == "supported" or out.answer == "not supported":
        return out
    if clear.answer == "not supported":
        return replace(out, answer="not supported", why=f"{name(good)} is not above chance beyond the range",
                       needs=None)
    why = f"{name(good)}'s interval beyond the range straddles chance ({chance:g})"
    return replace(out, answer="inconclusive", why=f"{out.why}; {why}" if out.why else why)
