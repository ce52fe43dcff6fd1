"""The arms a verdict reads, taken from the sweep file: one source of truth for which arms a question has.

A question's sweep file lists the values of each of its axes; its arms are their product, in the file's
order (:func:`swept_arms`, read with ``ablations.engine.sweepspec.load_sweep``). A verdict gets them as an
:class:`Arms` and names the arms it judges through :meth:`Arms.arm`, which refuses an arm the sweep does not
sweep. An arm the verdict does not judge must be declared ranked-only on the ``Question`` (``ranked_only``):
then it is ranked, either by the verdict (:attr:`Arms.ranking` or :attr:`Arms.ranked`) or, when the verdict
reads neither, by a ranking line on the question's metric appended to the verdict (``Question.judge``).
``tests/ablations/test_arms.py`` checks that every swept arm is judged or ranked-only, for every question.

The question's metric is declared once too: the sweep file's ``metric`` (:func:`sweep_metric`). The scale at which
its finding should show, which a verdict names when the quick scale shows nothing, travels with the arms
(:attr:`Arms.shows_at`, from ``Question.shows_at``).
"""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

from ablations.engine.sweepspec import load_sweep, proposable_values
from ablations.verdicts.rules import Arm

REPO = Path(__file__).resolve().parents[2]  # ablations/catalog/arms.py -> the repository

REST: Final = "rest"
"""``Question.ranked_only=REST``: every swept arm the verdict does not judge is ranked (e.g. position schemes
beyond those a paper compared), so a new arm needs only its sweep line."""

RankedOnly = tuple[Any, ...] | Literal["rest"]

FULL_PRESET: Final = "the full preset"
"""Where a finding should show when its question does not say (``Question.shows_at``, :meth:`Arms.of`)."""


def _sweeps_dir() -> Path:
    """sweeps/ of a source checkout, else the installed ``attnlab_sweeps`` data package (``pip install .``)."""
    if (REPO / "pyproject.toml").is_file():
        return REPO / "sweeps"
    spec = importlib.util.find_spec("attnlab_sweeps")
    return Path(next(iter(spec.submodule_search_locations))) if spec else REPO / "sweeps"


SWEEPS_DIR = _sweeps_dir()


class UnsweptArm(LookupError):
    """A verdict names an arm its question's sweep does not sweep."""


def swept_values(path: Path, axes: Sequence[str]) -> list[list[Any]]:
    """Each axis's values in the sweep file at ``path``, in the file's order (``[value]`` for a constant)."""
    params = load_sweep(path).get("parameters") or {}
    missing = [a for a in axes if a not in params]
    if missing:
        raise UnsweptArm(f"{path.name}: the question's axes {missing} are not parameters of the sweep")
    return [proposable_values(a, params[a]) for a in axes]


def swept_arms(path: Path, axes: Sequence[str]) -> tuple[Arm, ...]:
    """Every arm of the sweep: the product of its axes' values, in the file's order."""
    return tuple(itertools.product(*swept_values(path, axes)))


def sweep_metric(path: Path) -> tuple[str, str]:
    """The sweep file's ``metric``: (name, goal). The question reads its answer from this key."""
    metric = load_sweep(path).get("metric") or {}
    if not metric.get("name") or metric.get("goal") not in ("maximize", "minimize"):
        raise ValueError(f"{path.name}: a question's sweep names its metric (metric.name, metric.goal)")
    return str(metric["name"]), str(metric["goal"])


def as_arm(value: Any) -> Arm:
    """``"rope"`` -> ``("rope",)``; a tuple is already an arm (several axes)."""
    return tuple(value) if isinstance(value, tuple) else (value,)


class Arms:
    """The arms of one question as a verdict reads them.

    ``swept``: every arm, in the sweep file's order; ``baselines``: the question's baseline arms (``(label,)``,
    ``Question.baselines``), which run another config. ``strict``: :meth:`arm` raises :class:`UnsweptArm` for an arm
    in neither (:attr:`every`); not strict (:meth:`of`, for a verdict called on hand-made statistics) it
    returns any arm asked for. Records which arms were judged (:meth:`arm`) and whether the ranked-only ones
    were ranked (:attr:`ranking`, :attr:`ranked`). ``shows_at``: the scale at which the question's finding should
    show, for the verdict's "not shown at this scale" answers (``Question.shows_at``).
    """

    def __init__(self, *, swept: Iterable[Arm], ranked_only: RankedOnly = (), strict: bool = True,
                 where: str = "the sweep", shows_at: str = FULL_PRESET, baselines: Iterable[Arm] = (),
                 chosen: Mapping[str, Any] | None = None) -> None:
        self.swept: tuple[Arm, ...] = tuple(swept)
        self.baselines: tuple[Arm, ...] = tuple(baselines)
        self._ranked_only = ranked_only
        self.strict = strict
        self.where = where
        self.shows_at = shows_at
        self.judged: list[Arm] = []
        self.ranked_read = False
        self._chosen = dict(chosen or {})

    @classmethod
    def of(cls, stats: Mapping[Arm, Any], *, shows_at: str = FULL_PRESET, chosen: Mapping[str, Any] | None = None
           ) -> Arms:
        """The arms present in ``stats``, not strict: a verdict called without its question's arms."""
        return cls(swept=stats, strict=False, where="the statistics", shows_at=shows_at, chosen=chosen)

    def chosen(self, role: str) -> Arm:
        """The arm the question's plan chose for ``role`` on exploratory seeds (``Plan.chosen``), recorded as
        judged; never one picked on the seeds being judged. KeyError when the plan names none."""
        if role not in self._chosen:
            raise KeyError(f"the question's plan chooses no arm for {role!r} (Plan.chosen)")
        return self.arm(*as_arm(self._chosen[role]))

    def arm(self, *values: Any) -> Arm:
        """The arm with these axis values, recorded as judged; UnsweptArm when the sweep does not sweep it."""
        arm = tuple(values)
        if self.strict and arm not in self.every:
            raise UnsweptArm(f"the verdict reads arm {arm}, which {self.where} does not sweep "
                             f"(its arms: {list(self.every)})")
        if arm not in self.judged:
            self.judged.append(arm)
        return arm

    def arms(self, *values: Any) -> list[Arm]:
        """:meth:`arm` of each value (single-axis questions): ``arms.arms("gru", "lstm")``."""
        return [self.arm(*as_arm(v)) for v in values]

    @property
    def every(self) -> tuple[Arm, ...]:
        """The swept arms, then the question's baseline arms (``Question.baselines``: another config each)."""
        return self.swept + tuple(a for a in self.baselines if a not in self.swept)

    @property
    def declared_ranked(self) -> tuple[Arm, ...]:
        """The arms declared ranked-only (``REST``: every arm not judged so far)."""
        if self._ranked_only == REST:
            return tuple(a for a in self.every if a not in self.judged)
        return tuple(as_arm(v) for v in self._ranked_only)

    @property
    def ranked(self) -> list[Arm]:
        """The ranked-only arms, for a verdict that ranks them itself."""
        self.ranked_read = True
        return [a for a in self.every if a in self.declared_ranked] if self.strict else list(self.declared_ranked)

    @property
    def ranking(self) -> list[Arm]:
        """Every arm (baselines last), for a verdict's ranking of all arms (the ranked-only ones included)."""
        self.ranked_read = True
        return list(self.every)

    def unjudged(self) -> list[Arm]:
        """Arms (baselines included) neither judged nor declared ranked-only (what ``test_arms`` forbids)."""
        ranked = set(self.declared_ranked)
        return [a for a in self.every if a not in self.judged and a not in ranked]
