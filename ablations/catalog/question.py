"""What one ablation question is (:class:`Question`) and the verdict helpers the registries build theirs from;
the registered questions themselves are in ``ablations.catalog.questions`` (synthetic) and
``ablations.catalog.questions_real``.

A question may name baseline arms (``Question.baselines``): a label and a config of their own, e.g. a same-budget
network of another model class, which a W&B grid cannot cross with the sweep's axes. The offline runner
(``ablations.runner``) runs each baseline on the sweep's seeds after the grid's trials, with the quick preset's
flags that apply to its config, and records the label in the trial's parameters (:data:`BASELINE_KEY`); the
report groups such runs as the arm ``(label,)`` (:meth:`Question.baseline_of`) and the verdict reads them through
``Arms.arm(label)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import yaml

from ablations.catalog import claims
from ablations.catalog.arms import FULL_PRESET, REPO, SWEEPS_DIR, Arms, RankedOnly, sweep_metric, swept_arms
from ablations.catalog.plan import Plan
from ablations.engine.sweepspec import command_config, load_sweep
from ablations.verdicts.rules import Arm, better, join
from ablations.verdicts.stats import Stat

Goal = Literal["maximize", "minimize"]

ArmStats = Mapping[Arm, Mapping[str, Stat]]
"""arm -> metric key -> Stat; what a verdict reads."""

Verdict = Callable[[ArmStats, Arms | None], str]
"""Reads the per-arm statistics and the question's arms (None: the arms in the statistics)."""

# Extra CLI arguments appended after ${args} for `--scale quick`: a trial takes well under a
# minute on a CPU core. They shrink data and epochs only; never a question's own axis.
QUICK_DATA = ("--trainer.max_epochs=3", "--data.train_size=3200", "--data.val_size=128",
              "--data.test_size=128", "--trainer.log_every_n_steps=5")
QUICK_TRANSFORMER = (*QUICK_DATA, "--model.warmup_steps=30")

BASELINE_KEY = "baseline"
"""The trial parameter naming a baseline arm (``Question.baselines``): recorded in ``trial.json``'s params by the
runner, never passed to the command."""


@cache
def model_class(config: Path) -> str | None:
    """The ``model.class_path`` a config file names (None when it names none or cannot be read)."""
    try:
        model = (yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get("model")
    except (OSError, yaml.YAMLError):
        return None
    return model.get("class_path") if isinstance(model, dict) else None


@dataclass(frozen=True)
class Question:
    """One ablation question.

    Args:
        name: sweep name = experiment (run-directory group) name.
        sweep: sweep file name under ``sweeps/``; left out, ``<name>.yaml``.
        axes: the sweep parameters that define an arm (seeds excluded), as CLI paths; the arms are the
            product of their values in the sweep file (``swept``).
        probes: metric keys or key prefixes (ending in ``/``) the report adds as columns.
        expected: the finding we expect, with its source, in one or two sentences.
        verdict: reads the per-arm statistics and the question's ``Arms`` and returns one line starting with
            "supported", "supported where shown", "not supported", "inconclusive" or "not shown at this scale"
            (``ablations.verdicts.rules.join``); it names every arm it judges through ``Arms.arm``.
        metric, goal: the key that answers the question (an exact logged key) and whether higher
            (maximize) or lower (minimize) is better. Left out (every registered question): the sweep file's
            ``metric.name`` and ``metric.goal``, so they are declared once; given only for an ad-hoc experiment.
        ranked_only: the swept arms the verdict does not judge, only ranks (values of a single axis, or arm
            tuples); ``REST``: every swept arm the verdict does not judge. A verdict that does not rank them
            itself (``Arms.ranking``/``Arms.ranked``) gets a ranking on ``metric`` appended (``judge``).
        quick: CLI overrides for ``--scale quick`` (appended after ``${args}``).
        claim: the claim in one line, for the findings table. source: paper, table/figure/section.
        target: the value of ``metric`` whose first crossing gives ``curve/steps_to_target``.
        full: the full (GPU) preset and what it should show, for the documentation.
        shows_at: the scale at which the finding should show, named by the verdict's "not shown at this scale"
            answers (``Arms.shows_at``).
        media: the W&B image keys of the question's figures, for ``attnlab dashboard`` (``{arm}``: each value of
            the question's single axis); none for a question whose runs draw no figures.
        figures: draws the figures computed rather than trained into a folder and returns their paths (for
            ``attnlab findings``); imports what it needs only when called.
        test_domains: out-of-domain ``--data.test_domain`` values each finished trial is tested on (``domains``).
        baselines: label -> config file (relative to the repository) of each baseline arm: a network the sweep's
            grid cannot cross (another model class), run on the sweep's seeds with the quick flags that apply to
            it; the verdict reads it as the arm ``(label,)`` (``Arms.arm(label)``). See the module docstring.
        preset_changed: how and why the quick preset changed after its verdict had been seen (the report and the
            findings README print it, so a reader knows the preset was not chosen blind); empty if it never did.
        plan: the pre-registered plan its confirmatory seeds are judged on (``ablations.catalog.plan``); the
            verdict reads the arms it chose (``Arms.chosen``).

    The registries' order (``ablations.catalog.questions.QUESTIONS``,
    ``ablations.catalog.questions_real.REAL_QUESTIONS``) is the
    order in which ``attnlab findings`` runs and reports the questions.
    """

    name: str
    axes: tuple[str, ...]
    probes: tuple[str, ...]
    expected: str
    verdict: Verdict
    sweep: str = ""
    metric: str = ""
    goal: Goal | None = None
    ranked_only: RankedOnly = ()
    quick: tuple[str, ...] = QUICK_TRANSFORMER
    claim: str = ""
    source: str = ""
    target: float | None = None
    full: str = "attnlab sweep sweeps/<name>.yaml (the config as written)"
    shows_at: str = FULL_PRESET
    media: tuple[str, ...] = ()
    figures: Callable[[Path], list[Path]] | None = None
    test_domains: tuple[str, ...] = ()
    baselines: Mapping[str, str] = field(default_factory=dict, hash=False)
    preset_changed: str = ""
    plan: Plan | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "baselines", MappingProxyType(dict(self.baselines)))
        if not self.sweep:
            object.__setattr__(self, "sweep", f"{self.name}.yaml")
        if not self.metric:
            metric, goal = sweep_metric(self.sweep_path)
            object.__setattr__(self, "metric", metric)
            object.__setattr__(self, "goal", goal)
        if self.goal not in ("maximize", "minimize"):
            raise ValueError(f"question {self.name}: goal must be maximize or minimize, not {self.goal!r}")

    @property
    def sweep_path(self) -> Path:
        return SWEEPS_DIR / self.sweep

    @property
    def swept(self) -> tuple[Arm, ...]:
        """Every arm the sweep file sweeps (the product of the axes' values, in the file's order)."""
        return swept_arms(self.sweep_path, self.axes)

    @property
    def baseline_arms(self) -> tuple[Arm, ...]:
        """The baseline arms, ``(label,)`` each, in declaration order."""
        return tuple((label,) for label in self.baselines)

    def baseline_config(self, label: str) -> Path:
        """The config file of baseline ``label``."""
        return REPO / self.baselines[label]

    def baseline_of(self, params: Mapping[str, Any]) -> str | None:
        """The baseline a run of this question belongs to, from its flat params: the label the runner recorded
        (:data:`BASELINE_KEY`), else (a run started by hand or by ``wandb agent``, which record none) the
        baseline whose config's model class the run has, when the sweep's own config has another; None for a
        run of the sweep."""
        if not self.baselines:
            return None
        label = params.get(BASELINE_KEY)
        if label in self.baselines:
            return str(label)
        run_class = params.get("model.class_path")
        if not run_class or not self.sweep_path.is_file():
            return None
        own = command_config(load_sweep(self.sweep_path))
        if own is not None and model_class(REPO / own) == run_class:
            return None
        return next((b for b in self.baselines if model_class(self.baseline_config(b)) == run_class), None)

    def arms(self) -> Arms:
        """The arms a verdict reads: the sweep's and the baselines, strict (a verdict naming another arm fails)."""
        return Arms(swept=self.swept, ranked_only=self.ranked_only, where=f"sweeps/{self.sweep}",
                    shows_at=self.shows_at, baselines=self.baseline_arms, chosen=self.chosen)

    @property
    def chosen(self) -> Mapping[str, Any]:
        """The arms the plan chose on exploratory seeds (role -> arm value); empty without a plan."""
        return self.plan.chosen if self.plan else {}

    def judge(self, stats: ArmStats) -> str:
        """The verdict on ``stats`` over the sweep's arms, ranked-only arms ranked on ``metric`` when the verdict
        does not rank them itself. An experiment without a sweep file (ad hoc) is judged over the arms it ran."""
        arms = self.arms() if self.sweep_path.is_file() else Arms.of(stats, shows_at=self.shows_at,
                                                                      chosen=self.chosen)
        line = self.verdict(stats, arms)
        if arms.ranked_read or not arms.declared_ranked:
            return line
        return line + claims._ranking(stats, list(arms.declared_ranked), metric=self.metric,
                                      maximize=self.goal == "maximize", label=f"ranked, not judged ({self.metric})")


def all_beat(winners: list[Arm], losers: list[Arm], *, metric: str, goal: Goal, sesoi: float) -> Verdict:
    """Verdict: *every* arm in ``winners`` beats every arm in ``losers`` by at least ``sesoi``. (There is no
    "the best of winners" form: an arm picked on the seeds that judge it is not a test, issue #42.)"""

    def verdict(stats: ArmStats, arms: Arms | None = None) -> str:
        return join([better(stats, w, b, metric=metric, goal=goal, sesoi=sesoi) for w in winners for b in losers])

    return verdict


