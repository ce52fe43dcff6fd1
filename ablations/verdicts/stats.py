"""Statistics over seeds that a reviewer accepts: per-arm mean, std and 95% interval, comparisons
paired by seed with an effect size, and the three-way outcome a verdict is built from.

* ``Stat``: mean, sample std, n and the per-seed values of one metric of one arm; ``ci95`` is the
  Student-t interval of the mean (t_{0.975, n-1}; no interval for n < 2). The t quantile is exact for
  every df (``t_quantile``, from the regularized incomplete beta function), not a table with a normal
  tail. ``text`` clips a printed interval to the metric's range (``ablations.verdicts.ranges``); the comparisons
  and verdicts compute with the unclipped one.
* ``compare``: arm a against arm b on the seeds both finished. The per-seed differences give the
  mean difference, its t interval, an exact sign-flip permutation p-value (one-sided in the direction of
  the observed difference, 2^n sign patterns: its smallest value is 1/2^n, so with 3 seeds it can never go
  below 0.125 and with 5 never below 0.031; the interval is what decides, and ``Comparison.disagreement``
  says when the two disagree) and the paired effect size d_z = mean / sd of the differences
  (Lakens 2013, eq. 6). Without two common seeds it falls back to the unpaired Welch interval.
* ``Outcome``: "better" when the interval lies above ``floor`` (in the direction of the goal),
  "worse" when it lies below zero, otherwise "within seed noise"; "n too small" below two pairs.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Goal = Literal["maximize", "minimize"]
Outcome = Literal["better", "worse", "within seed noise", "n too small"]

Bounds = tuple[float, float]
UNBOUNDED: Bounds = (-math.inf, math.inf)


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta I_x(a, b) (DLMF §8.17(v)), evaluated by the
    modified Lentz method; converges fast for x < (a + 1) / (a + b + 2)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 10_000):
        even = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        for coef in (even, odd):
            d = 1.0 + coef * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + coef / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-16:
            break
    return f


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) for a, b > 0 and x in [0, 1] (DLMF §8.17), with the
    symmetry I_x(a, b) = 1 - I_{1-x}(b, a) where the fraction would converge slowly."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) of Student's t with ``df`` degrees of freedom, t >= 0: ½ I_{df/(df+t²)}(df/2, ½), the standard
    relation of the t distribution to the incomplete beta function."""
    return 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(p: float, df: float) -> float:
    """The quantile t_{p, df} of Student's t for p in [0.5, 1) and any real df > 0 (Welch's df is fractional),
    by bisection on ``t_sf`` to float precision (no table, no normal approximation)."""
    if not (0.5 <= p < 1.0 and df > 0):
        return math.nan
    if p == 0.5:
        return 0.0
    tail = 1.0 - p
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > tail:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-14 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if t_sf(mid, df) > tail else (lo, mid)
    return 0.5 * (lo + hi)


@functools.lru_cache(maxsize=1024)  # a report asks for the same few df (seeds - 1) many times
def t_critical(p: float, df: float) -> float:
    """t_{p, df} for an interval's half-width: :func:`t_quantile`, nan for df < 1 (fewer than two values)."""
    return t_quantile(p, df) if df >= 1 else math.nan


def t975(df: float) -> float:
    """t_{0.975, df}, exact for every df (e.g. 12.706 at df 1, 2.0395 at df 31, 1.9623 at df 1000); nan for df < 1."""
    return t_critical(0.975, df)


POWER = 0.8
MAX_SEEDS = 10_000
P_LEVEL = 0.025
"""The one-sided level matching a two-sided 95% interval (``Comparison.disagreement``)."""


def t95(df: float) -> float:
    """t_{0.95, df}: the one-sided quantile of a 90% interval (two one-sided tests at 5%, Schuirmann 1987)."""
    return t_critical(0.95, df)


def seeds_for_power(effect: float, *, paired: bool) -> int | None:
    """Seeds that would resolve a difference of standardised size ``effect`` with probability ``POWER`` (0.8).

    The usual t approximation to the power of a two-sided 95% test (Cohen 1988, ch. 2): paired, the smallest
    n with sqrt(n)·|d_z| >= t_{0.975, n-1} + t_{0.8, n-1}; unpaired, per arm, with sqrt(n/2)·|d| and
    2n - 2 degrees of freedom. None when the effect is zero, not finite, or needs more than ``MAX_SEEDS``."""
    if not math.isfinite(effect) or effect == 0:
        return None
    z = (1.959963984540054 + 0.8416212335729143) / abs(effect)  # normal quantiles at 0.975 and POWER
    least = z * z * (1 if paired else 2)  # t > z: no n below the normal answer does
    if least > MAX_SEEDS:
        return None
    for n in range(max(2, math.floor(least)), MAX_SEEDS + 1):
        df = n - 1 if paired else 2 * n - 2
        reach = math.sqrt(n if paired else n / 2) * abs(effect)
        if reach >= t975(df) + t_quantile(POWER, df):
            return n
    return None


def _is_integer(x: float) -> bool:
    return math.isfinite(x) and float(x).is_integer()


def _clip(lo: float, hi: float, bounds: Bounds) -> tuple[float, float]:
    return max(lo, bounds[0]), min(hi, bounds[1])


@dataclass(frozen=True)
class Stat:
    """Mean ± sample std of one metric over an arm's finished seeds (nan mean when n == 0).

    ``values`` holds ``(seed, value)`` per finished run, so two arms can be paired by seed.
    """

    mean: float
    std: float
    n: int
    values: tuple[tuple[Any, float], ...] = ()

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        """Student-t interval of the mean at ``level`` (0.95 or 0.90); (nan, nan) for fewer than two values."""
        if self.n < 2 or not math.isfinite(self.std):
            return math.nan, math.nan
        half = t_critical(0.5 + level / 2, self.n - 1) * self.std / math.sqrt(self.n)
        return self.mean - half, self.mean + half

    @property
    def ci95(self) -> tuple[float, float]:
        """:meth:`ci` at 95%."""
        return self.ci(0.95)

    def text(self, digits: int = 3, *, bounds: Bounds = UNBOUNDED, count: bool = False) -> str:
        """``mean ± std [lo, hi]`` (no interval below two seeds); the interval clipped to the metric's
        ``bounds`` (a mean of values in [0, 1] cannot lie outside it). For a ``count`` (steps, parameters),
        whole numbers print as integers and others with one decimal."""
        if self.n == 0:
            return "—"
        digits = 1 if count else digits

        def num(x: float) -> str:
            return f"{x:.0f}" if count and _is_integer(x) else f"{x:.{digits}f}"

        lo, hi = _clip(*self.ci95, bounds)
        ci = f" [{num(lo)}, {num(hi)}]" if math.isfinite(lo) and math.isfinite(hi) else ""
        return f"{num(self.mean)} ± {num(self.std)}{ci}"


def stat(values: Iterable[float], seeds: Sequence[Any] | None = None) -> Stat:
    """Mean, sample std (0 for one value) and the per-seed values of the finite ``values``."""
    raw = list(values)
    keys = list(seeds) if seeds is not None else list(range(len(raw)))
    pairs = tuple((k, float(v)) for k, v in zip(keys, raw, strict=True) if math.isfinite(v))
    vals = [v for _, v in pairs]
    if not vals:
        return Stat(mean=math.nan, std=math.nan, n=0)
    mean = sum(vals) / len(vals)
    std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
    return Stat(mean=mean, std=std, n=len(vals), values=pairs)


@dataclass(frozen=True)
class Comparison:
    """a minus b, signed so that positive means a is better for ``goal``.

    Args:
        diff: mean difference. lo, hi: its 95% interval. n: pairs (or min arm size when unpaired).
        p: one-sided exact sign-flip permutation p-value in the direction of the observed difference (nan when
            unpaired); compared with 0.025, the one-sided level of the two-sided 95% interval.
        effect: d_z (paired) or Hedges-free Cohen's d on the pooled std (unpaired); inf when the
            differences have zero spread and a non-zero mean.
        paired: True when the comparison is over common seeds.
        spread: the standard deviation ``effect`` divides by (of the paired differences, or pooled).
        lo90, hi90: the 90% interval, for an equivalence test (two one-sided tests at 5%; ``rules.similar``).
    """

    diff: float
    lo: float
    hi: float
    n: int
    p: float
    effect: float
    paired: bool
    spread: float = math.nan
    lo90: float = math.nan
    hi90: float = math.nan

    def outcome(self, *, floor: float = 0.0) -> Outcome:
        """better / worse / within seed noise / n too small, from the interval (floor: smallest gain that counts)."""
        if self.n < 2 or not math.isfinite(self.lo):
            return "n too small"
        if self.lo > 0 and self.diff > floor:
            return "better"
        if self.hi < 0:
            return "worse"
        return "within seed noise"

    def disagreement(self) -> str:
        """Empty when the interval and the sign-flip p agree (both clear zero at the 2.5% one-sided level, or
        neither does); else one clause saying so, and that the interval decides."""
        if not (math.isfinite(self.p) and math.isfinite(self.lo)):
            return ""
        clears, small = self.lo > 0 or self.hi < 0, self.p <= P_LEVEL
        if clears == small:
            return ""
        least = 1 / 2**self.n
        if clears:
            floor = f" (its smallest value with {self.n} seeds is {least:.3f})" if least > P_LEVEL else ""
            return (f"the interval clears zero but the sign-flip p={self.p:.3f} is above {P_LEVEL}{floor}; "
                    "the interval decides")
        return f"the sign-flip p={self.p:.3f} is below {P_LEVEL} but the interval holds zero; the interval decides"

    def text(self, digits: int = 3, *, bounds: Bounds = UNBOUNDED, count: bool = False) -> str:
        """``Δ=... [lo, hi] (...)``; the interval clipped to what a difference of values in ``bounds`` can be;
        a difference of counts that is a whole number prints as one."""
        kind = "paired" if self.paired else "unpaired"
        width = bounds[1] - bounds[0]
        lo, hi = _clip(self.lo, self.hi, (-width, width))
        if count:
            digits = 0 if all(_is_integer(x) for x in (self.diff, lo, hi)) else 1
        p = f", p={self.p:.3f}" if math.isfinite(self.p) else ""
        eff = "∞" if math.isinf(self.effect) else f"{self.effect:.2f}"
        odd = f"; {why}" if (why := self.disagreement()) else ""
        return (
            f"Δ={self.diff:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}] ({kind}, n={self.n}{p}, d={eff}{odd})"
        )


def sign_flip_p(diffs: Sequence[float]) -> float:
    """Exact one-sided p of the mean difference under random sign flips (H0: symmetric around 0)."""
    n = len(diffs)
    if n == 0:
        return math.nan
    observed = sum(diffs) / n
    count = sum(
        1
        for signs in itertools.product((1, -1), repeat=n)
        if sum(s * d for s, d in zip(signs, diffs, strict=True)) / n >= observed - 1e-12
    )
    return count / 2**n


def _effect(mean: float, sd: float) -> float:
    if sd > 0:
        return mean / sd
    return 0.0 if mean == 0 else math.copysign(math.inf, mean)


def compare(a: Stat, b: Stat, *, goal: Goal) -> Comparison:
    """Arm a against arm b, paired by seed where at least two seeds are common."""
    sign = 1.0 if goal == "maximize" else -1.0
    bv = dict(b.values)
    common = [(v, bv[k]) for k, v in a.values if k in bv]
    if len(common) >= 2:
        d = [sign * (x - y) for x, y in common]
        s = stat(d)
        lo, hi = s.ci95
        p = sign_flip_p(d) if s.mean >= 0 else sign_flip_p([-x for x in d])  # in the observed direction
        return Comparison(
            diff=s.mean, lo=lo, hi=hi, n=s.n, p=p, effect=_effect(s.mean, s.std), paired=True,
            spread=s.std, lo90=s.ci(0.90)[0], hi90=s.ci(0.90)[1],
        )
    diff = sign * (a.mean - b.mean)
    if a.n < 2 or b.n < 2:
        return Comparison(
            diff=diff, lo=math.nan, hi=math.nan, n=min(a.n, b.n), p=math.nan, effect=math.nan, paired=False
        )
    va, vb = a.std**2 / a.n, b.std**2 / b.n
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / ((va**2 / (a.n - 1)) + (vb**2 / (b.n - 1))) if se > 0 else a.n + b.n - 2
    half = t975(df) * se
    pooled = math.sqrt(((a.n - 1) * a.std**2 + (b.n - 1) * b.std**2) / (a.n + b.n - 2))
    return Comparison(
        diff=diff,
        lo=diff - half,
        hi=diff + half,
        n=min(a.n, b.n),
        p=math.nan,
        effect=_effect(diff, pooled),
        paired=False,
        spread=pooled,
        lo90=diff - t95(df) * se,
        hi90=diff + t95(df) * se,
    )
