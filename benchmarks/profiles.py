"""torch.profiler summaries that explain a missed goal: the top operators by self CPU time."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.common import Precision, Size, random_pair
from benchmarks.systems import BUILDERS
from benchmarks.training import train_step_fn


def top_ops(fn: Callable[[], object], *, calls: int, top: int, warmup: bool = True) -> list[dict]:
    """Run ``fn`` (once untimed if ``warmup``, then ``calls`` times) under the profiler; the ``top``
    ops by self CPU time.

    Returns:
        [{"op", "self_ms" (per call of fn), "share" (of all self time), "count"}], largest first.
    """
    if warmup:
        fn()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            fn()
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events) or 1.0
    events.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    return [{"op": e.key, "self_ms": e.self_cpu_time_total / 1e3 / calls, "share": e.self_cpu_time_total / total,
             "count": e.count // calls} for e in events[:top]]


def profile_training(size: Size, system: str, precision: Precision, *, calls: int, top: int,
                     warmup: bool = True) -> list[dict]:
    """Top ops of one training step of ``system`` at ``size`` and ``precision``."""
    src, tgt = random_pair(size)
    torch.manual_seed(0)
    fn = train_step_fn(BUILDERS[system](size), src, tgt, precision)
    return top_ops(fn, calls=calls, top=top, warmup=warmup)


def profile_decoding(size: Size, system: str, beam: int, *, calls: int, top: int) -> list[dict]:
    """Top ops of one decode call (encoder + ``size.length`` steps) of ``system``."""
    src, _ = random_pair(size, seed=1)
    torch.manual_seed(0)
    built = BUILDERS[system](size)
    built.module.eval()
    return top_ops(lambda: built.decode(src, beam, size.length), calls=calls, top=top)
