"""Learning-rate schedules as multipliers of the peak learning rate, stepped per optimizer step."""

from __future__ import annotations

import math
from collections.abc import Callable

from lit_models.axes import LRSchedule


def noam(step: int, *, warmup: int, total: int) -> float:
    """Vaswani eq. 3 normalised to peak 1 at ``warmup``: min(step/warmup, sqrt(warmup/step)).

    With peak lr = d_model^-0.5 · warmup^-0.5 this is exactly
    lrate = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5) (7.0e-4 for the base model).
    ``step`` counts from 1.
    """
    step = max(step, 1)
    return min(step / max(warmup, 1), math.sqrt(max(warmup, 1) / step))


def constant(step: int, *, warmup: int, total: int) -> float:
    """Linear warm-up to the peak over ``warmup`` steps, then constant (warmup=0: constant)."""
    return min(1.0, max(step, 1) / warmup) if warmup > 0 else 1.0


def cosine(step: int, *, warmup: int, total: int) -> float:
    """Linear warm-up, then half a cosine from the peak to 0 at ``total`` steps (Loshchilov 2017)."""
    if step < warmup:
        return max(step, 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return 0.5 * (1.0 + math.cos(math.pi * progress))


LR_SCHEDULES: dict[LRSchedule, Callable[..., float]] = {"noam": noam, "constant": constant, "cosine": cosine}


def paper_noam_lr(step: int, *, d_model: int, warmup: int) -> float:
    """The paper's formula written literally, for tests and documentation (Vaswani eq. 3)."""
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
