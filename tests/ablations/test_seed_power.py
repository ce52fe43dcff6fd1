"""Seed counts for 80% power: published sample sizes, their monotonicity, and how a verdict within seed noise
says how many seeds would resolve it (``ablations.verdicts.stats.seeds_for_power``)."""

from __future__ import annotations

import math

import pytest

from ablations.verdicts.rules import at_scale, better
from ablations.verdicts.stats import seeds_for_power, stat


@pytest.mark.parametrize(("effect", "paired", "seeds"), [
    (1.0, True, 10),  # G*Power 3.1, matched pairs, two-tailed alpha 0.05, power 0.8: total n 10
    (0.5, True, 34),  # G*Power: 34
    (-0.5, True, 34),  # the sign does not matter
    (0.5, False, 64),  # two independent groups, d 0.5: 64 per group
])
def test_seeds_for_power_matches_the_published_sample_sizes(effect, paired, seeds):
    assert seeds_for_power(effect, paired=paired) == seeds


def test_larger_effects_need_fewer_seeds_and_never_fewer_than_two():
    counts = [seeds_for_power(d, paired=True) for d in (0.3, 0.5, 0.8, 1.2, 2.0, 5.0, 50.0)]
    assert counts == sorted(counts, reverse=True) and counts[-1] == 2


@pytest.mark.parametrize("effect", [0.0, math.inf, math.nan, 0.01])  # 0.01 needs ~78,000 pairs: beyond MAX_SEEDS
def test_seeds_for_power_says_none_where_no_count_would_do(effect):
    assert seeds_for_power(effect, paired=True) is None


def test_a_comparison_within_seed_noise_says_how_many_seeds_would_resolve_it():
    noisy = better({("a",): {"m": stat([0.70, 0.62, 0.75], [1, 2, 3])},
                             ("b",): {"m": stat([0.66, 0.64, 0.70], [1, 2, 3])}}, ("a",), ("b",), metric="m",
                            goal="maximize")
    assert noisy.answer == "inconclusive" and noisy.needs is not None and noisy.needs > 3
    assert f"about {noisy.needs} seeds would resolve the observed difference at 80% power" in noisy.text()
    shown = at_scale(noisy, "the gap should widen with depth")
    assert shown.needs == noisy.needs and "80% power" in shown.text()
    clear = better({("a",): {"m": stat([0.9, 0.91, 0.92], [1, 2, 3])},
                             ("b",): {"m": stat([0.5, 0.52, 0.5], [1, 2, 3])}}, ("a",), ("b",), metric="m",
                            goal="maximize")
    assert clear.answer == "supported" and clear.needs is None and "power" not in clear.text()


def test_a_published_difference_says_how_many_seeds_it_would_need_at_these_seeds_spread():
    noisy = better({("a",): {"m": stat([0.73, 0.64, 0.77], [1, 2, 3])},
                    ("b",): {"m": stat([0.66, 0.64, 0.70], [1, 2, 3])}}, ("a",), ("b",), metric="m", goal="maximize")
    spread = stat([0.07, 0.0, 0.07]).std  # the paired differences' standard deviation
    assert abs(noisy.spread - spread) < 1e-9
    shown = at_scale(noisy, "why", published=0.03)
    n = seeds_for_power(0.03 / spread, paired=True)
    assert n is not None and n > noisy.needs, "a smaller published gap needs more seeds than the observed one"
    assert f"the published difference of 0.03 would need about {n} seeds at 80% power" in shown.text()
    assert "published" not in at_scale(noisy, "why").text()
    assert at_scale(noisy, "why", published=1e-6).text().count("more than 10,000 seeds") == 1
