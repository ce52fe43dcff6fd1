"""A question's baseline arms in the offline runner (``Question.baselines``): a network of another config, such as
``ram_mnist``'s same-budget full-view classifier, which a W&B grid cannot cross with the sweep's axes.

Each baseline runs on each of the sweep's seeds, after the grid's trials, as the sweep's own command with the
baseline's config in place of the sweep's ``--config`` and the question's quick flags that apply to that config
(``ablations.engine.sweepspec.applicable_args``). Its trial is named ``baseline=<label>,seed=<n>`` and records the label
as the parameter ``BASELINE_KEY`` (``trial.json``), never passed to the command; ``Question.baseline_of`` reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ablations.catalog.question import BASELINE_KEY, REPO, Question
from ablations.engine.sweepspec import (
    SEED_KEY,
    applicable_args,
    proposable_values,
    render_command,
    trial_name,
    with_config,
)

Baselines = dict[str, tuple[str, list[str]]]
"""label -> (config file, the scale arguments that apply to it)."""


def baseline_specs(question: Question | None, scale_args: list[str]) -> Baselines:
    """The question's baselines with the scale arguments (a quick preset's flags) their configs accept."""
    if question is None:
        return {}
    return {label: (config, applicable_args(scale_args, REPO / config)) for label, config in question.baselines.items()}


def baseline_commands(sweep: Mapping[str, Any], baselines: Baselines, *,
                      interpreter: str) -> list[tuple[str, dict[str, Any], list[str]]]:
    """(trial name, params, command without the run-directory arguments) of each baseline on each of the
    sweep's seeds (the config's own seed when the sweep sweeps none), baseline by baseline."""
    spec = (sweep.get("parameters") or {}).get(SEED_KEY)
    seeds = proposable_values(SEED_KEY, spec) if spec else [None]
    out = []
    for label, (config, args) in baselines.items():
        for seed in seeds:
            run = {} if seed is None else {SEED_KEY: seed}
            params = {BASELINE_KEY: label, **run}
            command = with_config(render_command(sweep, run, interpreter=interpreter), config) + args
            out.append((trial_name(params, list(params)), params, command))
    return out
