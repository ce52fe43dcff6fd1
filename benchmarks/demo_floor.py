"""The demo's compute floor: its training steps alone, at the speed this machine runs them (issue #26).

``attnlab demo`` trains the arms its question judges at quick scale, ``seeds`` seeds an arm (its default: the
power estimate in the question's plan file), ``jobs`` trials at once,
one thread each. Whatever is cut from its trials' start-up, Lightning loop, logging, probes, figures, validation and
test, the demo cannot take less than its training steps. Each arm's step is measured here as the trial runs it:
the trial's own model and batches, built by the project's CLI from the trial's own command line (as
``ablations.stacked`` builds a seed), then forward (the family's ``training_loss``), backward, clipping at the
trial's ``gradient_clip_val`` and the fused AdamW of ``lit_models.training.optim``: nothing else.

The floor is Σ over the demo's trials of (seconds a step × the trial's steps) / ``jobs``: a lower bound that also
assumes the jobs pack with no idle core. When it exceeds the demo goal, no cut outside the training steps meets it.
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import torch

from ablations.commands import demo_plan
from ablations.engine.sweepspec import grid_params
from lit_models.training.optim import adamw

WARMUP_STEPS = 5
TIMED_STEPS = 40


class StepTimes(NamedTuple):
    """One trial's training step: median wall and process-CPU seconds over the timed steps, and the trial's steps."""

    wall_s: float
    cpu_s: float
    steps: int


def arm_step_s(args: list[str], *, timed: int = TIMED_STEPS, warmup: int = WARMUP_STEPS) -> StepTimes:
    """The training step of one trial's ``fit`` argv, timed ``timed`` times after ``warmup`` untimed steps: median
    wall seconds (``perf_counter``) and median process CPU seconds (``process_time``, which load from other
    processes inflates less), and the trial's steps."""
    from ablations.stacked import build

    cli = build([args])[0]
    model, data, trainer = cli.model, cli.datamodule, cli.trainer
    data.setup("fit")
    batches = list(data.train_dataloader())
    steps = int(trainer.max_epochs) * len(batches)
    opt = adamw(model.parameters(), lr=float(model.hparams.get("lr", 1e-3)))
    clip = trainer.gradient_clip_val
    model.train()
    walls, cpus = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # self.log outside a Trainer warns; nothing is logged here
        for i in range(warmup + timed):
            batch = batches[i % len(batches)]
            wall, cpu = time.perf_counter(), time.process_time()
            loss, _ = model.training_loss(batch, i)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), float(clip))
            opt.step()
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
    return StepTimes(statistics.median(walls[warmup:]), statistics.median(cpus[warmup:]), steps)


def floor_s(arms: Iterable[tuple[float, int]], *, seeds: int, jobs: int) -> float:
    """The floor: Σ over the arms of (seconds a step × the arm's steps), times ``seeds`` trials an arm, over
    ``jobs`` trials at once."""
    return sum(step_s * steps for step_s, steps in arms) * seeds / jobs


def demo_floor(root: Path, *, seeds: int | None = None, jobs: int = 2) -> dict[str, Any]:
    """{"arms": [{arm, params, step_ms, steps}], "floor_s", "seeds", "jobs", "threads"} for ``attnlab demo``'s
    defaults, each step timed at the threads a demo trial gets (its ``OMP_NUM_THREADS``, 1)."""
    seeds = seeds or demo_seed_count()
    plan = demo_plan(root, seeds=1)
    threads, before = int(plan.env.get("OMP_NUM_THREADS", "1")), torch.get_num_threads()
    arms = []
    torch.set_num_threads(threads)
    try:
        for params in plan_grid(plan):
            trial = plan.trial(params)
            step = arm_step_s(trial.command[trial.command.index("fit"):])
            arm = trial.name.removesuffix(f",seed={params.get('seed_everything')}")
            arms.append({"arm": arm, "params": params, "step_ms": step.wall_s * 1e3, "steps": step.steps})
    finally:
        torch.set_num_threads(before)
    floor = floor_s(((a["step_ms"] / 1e3, a["steps"]) for a in arms), seeds=seeds, jobs=jobs)
    return {"arms": arms, "floor_s": floor, "seeds": seeds, "jobs": jobs, "threads": threads}


def demo_seed_count() -> int:
    """How many seeds an arm ``attnlab demo`` trains by default: its question's plan (the checkout on ``sys.path``)."""
    from ablations.catalog.questions import QUESTIONS
    from ablations.commands import DEMO_QUESTION
    from ablations.reports.demo_lines import demo_seeds

    return len(demo_seeds(QUESTIONS[DEMO_QUESTION])[0])


def plan_grid(plan: Any) -> list[dict[str, Any]]:
    """The grid sweep's parameter sets (one seed: one per arm)."""
    return grid_params(plan.sweep)
