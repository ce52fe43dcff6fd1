"""Statistics over seeds that a reviewer accepts: per-arm mean, std and 95% interval, comparisons
paired by seed with an effect size, and the three-way outcome a verdict is built from.

* ``Stat``: mean, sample std, n and the per-seed values of one metric of one arm; ``ci95`` is the
  Student-t interval of the mean (t_{0.975, n-1}; no interval for n < 2).
* ``compare``: arm a against arm b on the seeds both finished. The per-seed differences give the
  mean difference, its t interval, an exact sign-flip permutation p-value (one-sided, 2^n sign
  patterns: its smallest value is 1/2^n, so with 3 seeds it can never go below 0.125 and the
  interval is what decides) and the paired effect size d_z = mean / sd of the differences
  (Lakens 2013, eq. 6). Without two common seeds it falls back to the unpaired Welch interval.
* ``Outcome``: "better" when the interval lies above ``floor`` (in the direction of the goal),
  "worse" when it lies below zero, otherwise "within seed noise"; "n too small" below two pairs.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Goal = Literal["maximize", "minimize"]
Outcome = Literal["better", "worse", "within seed noise", "n too small"]

# Two-sided 95% Student-t critical values t_{0.975, df} for df = 1..30 (standard tables).
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def t975(df: float) -> float:
    """t_{0.975, df}; 1.96 beyond the table (df > 30), nan for df < 1. Fractional df round down (conservative)."""
    if not df >= 1:
        return math.nan
    return _T975[int(df) - 1] if df < 31 else 1.96


@dataclass(frozen=True)
class Stat:
    """Mean ± sample std of one metric over an arm's finished seeds (nan mean when n == 0).

    ``values`` holds ``(seed, value)`` per finished run, so two arms can be paired by seed.
    """

    mean: float
    std: float
    n: int
    values: tuple[tuple[Any, float], ...] = ()

    @property
    def ci95(self) -> tuple[float, float]:
        """Student-t 95% interval of the mean; (nan, nan) for fewer than two values."""
        if self.n < 2 or not math.isfinite(self.std):
            return math.nan, math.nan
        half = t975(self.n - 1) * self.std / math.sqrt(self.n)
        return self.mean - half, self.mean + half

    def text(self, digits: int = 3) -> str:
        """``mean ± std [lo, hi]`` (no interval below two seeds)."""
        if self.n == 0:
            return "—"
        lo, hi = self.ci95
        ci = f" [{lo:.{digits}f}, {hi:.{digits}f}]" if math.isfinite(lo) else ""
        return f"{self.mean:.{digits}f} ± {self.std:.{digits}f}{ci}"


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
        p: one-sided exact sign-flip permutation p-value (nan when unpaired).
        effect: d_z (paired) or Hedges-free Cohen's d on the pooled std (unpaired); inf when the
            differences have zero spread and a non-zero mean.
        paired: True when the comparison is over common seeds.
    """

    diff: float
    lo: float
    hi: float
    n: int
    p: float
    effect: float
    paired: bool

    def outcome(self, *, floor: float = 0.0) -> Outcome:
        """better / worse / within seed noise / n too small, from the interval (floor: smallest gain that counts)."""
        if self.n < 2 or not math.isfinite(self.lo):
            return "n too small"
        if self.lo > 0 and self.diff > floor:
            return "better"
        if self.hi < 0:
            return "worse"
        return "within seed noise"

    def text(self, digits: int = 3) -> str:
        kind = "paired" if self.paired else "unpaired"
        p = f", p={self.p:.3f}" if math.isfinite(self.p) else ""
        eff = "∞" if math.isinf(self.effect) else f"{self.effect:.2f}"
        return (
            f"Δ={self.diff:+.{digits}f} [{self.lo:+.{digits}f}, {self.hi:+.{digits}f}] ({kind}, n={self.n}{p}, d={eff})"
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
        return Comparison(
            diff=s.mean, lo=lo, hi=hi, n=s.n, p=sign_flip_p(d), effect=_effect(s.mean, s.std), paired=True
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
    )
