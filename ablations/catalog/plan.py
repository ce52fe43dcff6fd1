"""A question's pre-registered plan (issue #42): what its confirmatory seeds will be judged on, declared in code
beside the question and rendered to a committed file (``ablations.catalog.plans``) before those seeds run.

What the plan declares itself (:class:`Plan`): its version, the claim as the cited source states it, which part
is the project's own hypothesis, the arms chosen on exploratory seeds (and why), and the history of the quick
preset. What it reads from the question rather than declaring again: the source, the metric and its goal, the
preset, the swept and ranked-only arms, and every comparison with its direction and smallest effect of interest
(recorded from the verdict's own checks, ``ablations.verdicts.rules.recording``). The confirmatory seed count
comes from a power estimate on the exploratory seeds (``ablations.catalog.power_estimate``).

Seed sets: the main (1..), replication (1001..) and power (2001..) seeds were read while presets and rules were
chosen, so they are *exploratory*. A plan's confirmatory seeds start at ``CONFIRM_FIRST`` and move by
``CONFIRM_STRIDE`` per version, so a changed plan always gets fresh seeds; the old plan's file is kept as
``<question>.v<N>.yaml`` with the reason (``Superseded``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ablations.catalog.power_estimate import LEAST

CONFIRM_FIRST = 3001
CONFIRM_STRIDE = 100
CONFIRM_SUBDIR = "confirm"
EXPLORATORY = (("main", 1), ("replication", 1001), ("power", 2001))
"""(set, first seed) of the seed sets read while presets and rules were chosen: exploratory everywhere."""


def seed_set(seed: object) -> str:
    """``confirmatory`` for a plan's seeds (``CONFIRM_FIRST`` and up), else ``exploratory (<set>)``."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        return "unknown"
    if seed >= CONFIRM_FIRST:
        return "confirmatory"
    return f"exploratory ({next((n for n, first in reversed(EXPLORATORY) if seed >= first), EXPLORATORY[0][0])})"


@dataclass(frozen=True)
class Superseded:
    """An earlier version of a plan: its version, why it changed, and the answer it had on record."""

    version: int
    reason: str
    answer: str


@dataclass(frozen=True)
class Plan:
    """One question's plan.

    Args:
        stated: the claim as the cited source states it (the section or figure is the question's ``source``).
        own: which part of the question is the project's own hypothesis rather than the source's (empty: none).
        chosen: role -> arm value, for a question that judges "the best of several": chosen on exploratory seeds
            and fixed here (the verdict reads it through ``Arms.chosen``), never picked on the judged seeds.
        chosen_why: the exploratory numbers or the source behind each choice.
        changes: why the headline may differ from the old one (rule, selection, preset or seeds).
        preset_history: how the quick preset came to be (changes made while reading exploratory seeds).
        version: 1 for a first plan; a change after confirmatory seeds ran means version + 1 (fresh seeds).
        seeds: the confirmatory seed count when fixed by hand (None: the power estimate decides); never below
            ``power_estimate.LEAST``.
        superseded: earlier versions with their reasons and answers.
    """

    stated: str
    changes: str
    own: str = ""
    chosen: Mapping[str, Any] = field(default_factory=dict, hash=False)
    chosen_why: str = ""
    preset_history: str = ""
    version: int = 1
    seeds: int | None = None
    superseded: tuple[Superseded, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "chosen", MappingProxyType(dict(self.chosen)))
        if self.seeds is not None and self.seeds < LEAST:
            raise ValueError(f"a plan's seed count is at least {LEAST}, not {self.seeds}")

    @property
    def first_seed(self) -> int:
        """The first confirmatory seed of this version (fresh for every version)."""
        return CONFIRM_FIRST + (self.version - 1) * CONFIRM_STRIDE

    def plan_id(self, question: str) -> str:
        return f"{question}/v{self.version}"
