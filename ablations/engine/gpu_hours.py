"""What a sweep's full preset costs on one H100, printed by ``attnlab sweep SWEEP --scale full --dry-run`` (issue #43).

For each arm of the sweep (its trials less the seed; a question's baseline arms too), one training step of the
arm's own model and batch (built by the project's CLI from the trial's command line by ``build``, which the command
layer passes in: ``ablations.stacked.build``, as it builds a seed) runs on the CPU under
``torch.utils.flop_counter.FlopCounterMode``: forward (the family's ``training_step`` as Lightning calls it; with no
trainer attached its ``self.log`` calls do nothing) and backward. The optimizer's few FLOPs a parameter are left out.
Then

    GPU-hours = Σ over trials of (FLOPs a step × steps) / (MFU × H100_PEAK) / 3600

with steps = ``max_epochs`` × batches an epoch (or ``max_steps`` where set and smaller; ``max_epochs`` = -1, no
epoch limit, leaves ``max_steps``, and an arm with neither limit is not estimated). Stated assumptions:
``MFU`` = 30% of the H100 SXM's dense bf16 tensor-core peak (989 TFLOP/s), i.e. a bf16-mixed run as efficient as
a well-fed Transformer. The step's first batch stands for every batch (bucketed batches vary in length). Small
recurrent models stepped token by token are latency-bound and reach far less than 30% (the CPU benchmark's
recurrent rows: about 15% of one core), so for them the estimate is a lower bound on the time; validation, test and
decoding are not counted.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable
from typing import Any

H100_PEAK_FLOPS = 989e12  # dense bf16, H100 SXM (NVIDIA's datasheet; 1979 is with 2:4 sparsity)
MFU = 0.30
Builder = Callable[[list[list[str]]], list[Any]]
PER_TRIAL = re.compile(r"^--(seed_everything|run\.name)=")  # what differs between the seeds of one arm
UNLOGGED = "You are trying to `self.log()` but the `self.trainer` reference is not registered"  # Lightning's warning


def step_flops(fit_args: list[str], build: Builder) -> tuple[float, int]:
    """(FLOPs of one training step, forward and backward, of the trial; the trial's training steps). ``build``
    turns a list of ``fit`` argument lists into built CLIs (``ablations.stacked.build``)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    cli = build([fit_args])[0]
    model, data, trainer = cli.model, cli.datamodule, cli.trainer
    data.prepare_data()
    data.setup("fit")
    loader = data.train_dataloader()
    steps = training_steps(trainer.max_epochs, trainer.max_steps, len(loader))
    model.train()
    with FlopCounterMode(display=False) as counter, torch.enable_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=re.escape(UNLOGGED))
        loss = model.training_step(next(iter(loader)), 0)
        loss.backward()
    return float(counter.get_total_flops()), steps


def training_steps(max_epochs: int | None, max_steps: int | None, batches: int) -> int:
    """The steps a fit runs: the smaller of its epoch limit × ``batches`` and ``max_steps``, where each is set
    (Lightning: -1 is no limit). ValueError when neither is (the run would go on until stopped)."""
    limits = [int(max_epochs) * batches] if max_epochs is not None and max_epochs >= 0 else []
    limits += [int(max_steps)] if max_steps is not None and max_steps >= 0 else []
    if not limits:
        raise ValueError(f"no limit on training steps (max_epochs={max_epochs}, max_steps={max_steps})")
    return min(limits)


def arms(commands: Iterable[list[str]]) -> dict[tuple[str, ...], int]:
    """Each arm's ``fit`` arguments (the seed and the run name dropped) -> its number of trials."""
    out: dict[tuple[str, ...], int] = {}
    for command in commands:
        args = tuple(a for a in command[command.index("fit"):] if not PER_TRIAL.match(a))
        out[args] = out.get(args, 0) + 1
    return out


def hours(flops: float, steps: int, trials: int) -> float:
    """GPU-hours on one H100 at ``MFU`` of its bf16 peak."""
    return flops * steps * trials / (MFU * H100_PEAK_FLOPS) / 3600


def labels(arm_args: list[tuple[str, ...]]) -> list[str]:
    """Each arm's label: the arguments that not every arm shares (a parameter of any group, a baseline's config
    file), or "(config as written)" where it has none."""
    shared = set.intersection(*map(set, arm_args)) if arm_args else set()
    return [" ".join(a.removeprefix("--") for a in args if a not in shared) or "(config as written)"
            for args in arm_args]


def estimate_lines(commands: Iterable[list[str]], build: Builder) -> list[str]:
    """The lines ``--scale full --dry-run`` prints: one per arm, then the sweep's total."""
    total, lines, unknown = 0.0, [], 0
    counted = arms(commands)
    for (args, trials), label in zip(counted.items(), labels(list(counted)), strict=True):
        try:
            flops, steps = step_flops(list(args), build)
        except Exception as err:  # noqa: BLE001 - an arm whose data is absent here is reported, not fatal
            unknown += 1
            message = str(err).strip().splitlines()
            why = type(err).__name__ + (f": {message[0][:120]}" if message else "")
            lines.append(f"  {label}: not estimated ({why})")
            continue
        h = hours(flops, steps, trials)
        total += h
        lines.append(f"  {label}: {flops / 1e9:.2f} GFLOP a step x {steps} steps x {trials} trials = {h:.3g} GPU-h")
    head = (f"estimated GPU time on one H100 (FLOPs counted on a CPU step; MFU {MFU:.0%} of "
            f"{H100_PEAK_FLOPS / 1e12:.0f} TFLOP/s bf16; a floor: latency-bound recurrent steps reach far less): "
            f"{total:.3g} GPU-hours ({total * 60:.1f} GPU-minutes)"
            + (f" for the {len(lines) - unknown} arms estimated" if unknown else ""))
    return [head, *lines]


def print_estimate(plan: Any, build: Builder, echo: Any = print) -> None:
    """Print ``estimate_lines`` for every trial of a grid sweep's plan, its baseline arms' trials included."""
    from ablations.engine.sweepspec import grid_params

    trials = [plan.trial(params) for params in grid_params(plan.sweep)] + plan.baseline_trials()
    for line in estimate_lines((trial.command for trial in trials), build):
        echo(line)
