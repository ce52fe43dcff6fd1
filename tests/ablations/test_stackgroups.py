"""Which trials the runner stacks (``ablations.engine.stackgroups``): fresh seeds of one arm, run by ``attnlab fit``."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablations.engine.stackgroups import SEPARATOR, fit_args, refusal_reason, stacked_command, sweep_refusal, units
from ablations.engine.trialstate import Trial

SEEDS = {"seed_everything": {"values": [1, 2, 3]}}


def trial(tmp_path: Path, arm: str, seed: int, program: str = "attnlab/cli.py") -> Trial:
    params = {"model.norm": arm, "seed_everything": seed}
    return Trial(name=f"norm={arm},seed={seed}", params=params, run_dir=tmp_path / f"{arm}{seed}",
                 command=["/usr/bin/env", "py", program, "fit", f"--model.norm={arm}", f"--seed_everything={seed}"])


def test_fresh_seeds_of_an_arm_are_grouped_in_order_and_the_rest_run_alone(tmp_path: Path) -> None:
    trials = [trial(tmp_path, arm, seed) for seed in (1, 2, 3) for arm in ("pre", "post")]
    skipped = trials[5]  # norm=post,seed=3: done already (the runner skips it in its turn)
    names = [[t.name for t in unit] for unit in units(trials, alone=lambda t: t is skipped)]
    assert names == [["norm=pre,seed=1", "norm=pre,seed=2", "norm=pre,seed=3"],
                     ["norm=post,seed=1", "norm=post,seed=2"], ["norm=post,seed=3"]]


def test_only_the_projects_fit_command_is_stacked(tmp_path: Path) -> None:
    other = [trial(tmp_path, "pre", seed, program="fake_cli.py") for seed in (1, 2)]
    assert fit_args(other[0].command) is None and [len(u) for u in units(other)] == [1, 1]
    ours = [trial(tmp_path, "pre", seed) for seed in (1, 2)]
    command = stacked_command(ours, interpreter="py")
    assert command == ["py", "-m", "ablations.stacked", "fit", "--model.norm=pre", "--seed_everything=1", SEPARATOR,
                       "fit", "--model.norm=pre", "--seed_everything=2"]


@pytest.mark.parametrize(("sweep", "stack", "why"), [
    ({"method": "grid", "parameters": SEEDS}, True, None),
    ({"method": "grid", "parameters": SEEDS}, False, "--no-stack"),
    ({"method": "random", "parameters": SEEDS}, True, "method random"),
    ({"method": "grid", "parameters": {"seed_everything": {"value": 1}}}, True, "one seed per arm"),
])
def test_a_sweep_says_why_its_trials_run_alone(sweep: dict, stack: bool, why: str | None) -> None:
    reason = sweep_refusal(sweep, stack=stack)
    assert reason == why if why is None else why in reason


def test_the_refusal_line_is_read_from_the_log(tmp_path: Path) -> None:
    log = tmp_path / "trial.log"
    log.write_text("$ py -m ablations.stacked ...\nnot stacked: GRU runs packed sequences\n")
    assert refusal_reason(log) == "not stacked: GRU runs packed sequences"
    assert refusal_reason(tmp_path / "missing.log").startswith("not stacked: ")
