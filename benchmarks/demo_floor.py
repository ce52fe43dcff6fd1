"""The demo's compute floor: its training steps alone, at the speed this machine runs them (issue #26).

``attnlab demo`` trains the arms its question judges at quick scale, ``seeds`` seeds an arm (its default: the
power estimate in the question's plan file), ``jobs`` trials at once,
one thread each. Whatever is cut from its trials' start-up, Lightning loop, logging, probes, figures, validation and
test, the demo cannot take less than its training steps. Each arm's step is measured here as the trial runs it:
the trial's own model and batches, built by the project's CLI from the trial's own command line (as
``ablations.stacked`` builds a seed), then forward (the family's ``training_loss``), backward, clipping at the
trial's ``gradient_clip_val`` and the fused AdamW of ``lit_models.optim``: nothing else.

The floor is Σ over the demo's trials of (seconds a step × the trial's steps) / ``jobs``: a lower bound that also
assumes the jobs pack with no idle core. When it exceeds the demo goal, no cut outside the training steps meets it.
"""

from __future__ import annotations

import itertools
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from ablations.commands import demo_plan
from ablations.engine.sweepspec import proposable_values
from lit_models.optim import adamw

WARMUP_STEPS = 5
TIMED_STEPS = 40


def arm_step_s(args: list[str], *, timed: int = TIMED_STEPS, warmup: int = WARMUP_STEPS) -> tuple[float, int]:
    """(median seconds per training step over ``timed`` steps, the trial's steps) for one trial's ``fit`` argv."""
    from ablations.stacked import build

    cli = build([args])[0]
    model, data, trainer = cli.model, cli.datamodule, cli.trainer
    data.setup("fit")
    batches = list(data.train_dataloader())
    steps = int(trainer.max_epochs) * len(batches)
    opt = adamw(model.parameters(), lr=float(model.hparams.get("lr", 1e-3)))
    clip = trainer.gradient_clip_val
    model.train()
    times = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # self.log outside a Trainer warns; nothing is logged here
        for i in range(warmup + timed):
            batch = batches[i % len(batches)]
            start = time.perf_counter()
            loss, _ = model.training_loss(batch, i)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), float(clip))
            opt.step()
            times.append(time.perf_counter() - start)
    return statistics.median(times[warmup:]), steps


def demo_floor(root: Path, *, seeds: int | None = None, jobs: int = 2) -> dict[str, Any]:
    """{"arms": [{arm, params, step_ms, steps}], "floor_s", "seeds", "jobs", "threads"} for ``attnlab demo``'s
    defaults, each step timed at the threads a demo trial gets (its ``OMP_NUM_THREADS``, 1)."""
    from ablations.catalog.questions import QUESTIONS
    from ablations.commands import DEMO_QUESTION
    from ablations.reports.demo_lines import demo_seeds

    seeds = seeds or demo_seeds(QUESTIONS[DEMO_QUESTION])[0]
    plan = demo_plan(root, seeds=1)
    threads, before = int(plan.env.get("OMP_NUM_THREADS", "1")), torch.get_num_threads()
    arms = []
    torch.set_num_threads(threads)
    try:
        for params in plan_grid(plan):
            trial = plan.trial(params)
            step_s, steps = arm_step_s(trial.command[trial.command.index("fit"):])
            arm = trial.name.removesuffix(f",seed={params.get('seed_everything')}")
            arms.append({"arm": arm, "params": params, "step_ms": step_s * 1e3, "steps": steps})
    finally:
        torch.set_num_threads(before)
    floor = sum(a["step_ms"] / 1e3 * a["steps"] for a in arms) * seeds / jobs
    return {"arms": arms, "floor_s": floor, "seeds": seeds, "jobs": jobs, "threads": threads}


def plan_grid(plan: Any) -> list[dict[str, Any]]:
    """The grid sweep's parameter sets (one seed: one per arm)."""
    specs = plan.sweep["parameters"]
    values = [proposable_values(name, spec) for name, spec in specs.items()]
    return [dict(zip(specs, combo, strict=True)) for combo in itertools.product(*values)]
