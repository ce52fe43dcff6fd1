"""Section: the AdamW step alone over attnlab's parameters, in torch's three implementations.

``default`` is ``torch.optim.AdamW`` as built without options (on CPU torch picks the per-tensor
loop), ``foreach`` the multi-tensor path, ``fused`` the one-kernel-per-tensor path that
``lit_models.training.optim.adamw`` (every ``configure_optimizers``) picks on CPU and CUDA. Gradients are
random and fixed; each implementation has its own state, and all are timed round-robin.
"""

from __future__ import annotations

import torch

from benchmarks.common import Size, interleaved_times
from benchmarks.systems import ADAMW, build_attnlab
from lit_models.training.optim import adamw

IMPLEMENTATIONS = {
    "default": lambda params: torch.optim.AdamW(params, **ADAMW),
    "foreach": lambda params: adamw(params, fused=False, **ADAMW),
    "fused": lambda params: adamw(params, **ADAMW),
}


def bench_optimizer(sizes: list[Size], *, rounds: int, steps: int, warmup: int) -> list[dict]:
    """Rows {size, impl, params_m, step_s, speedup} (speed-up over ``default``)."""
    rows = []
    for size in sizes:
        torch.manual_seed(0)
        params = list(build_attnlab(size).module.parameters())
        for p in params:
            p.grad = torch.randn_like(p) * 1e-3
        opts = {name: make(params) for name, make in IMPLEMENTATIONS.items()}
        secs = interleaved_times({name: opt.step for name, opt in opts.items()}, warmup=warmup, rounds=rounds,
                                 steps=steps)
        count = sum(p.numel() for p in params) / 1e6
        rows += [{"size": size.name, "impl": name, "params_m": count, "step_s": t, "speedup": secs["default"] / t}
                 for name, t in secs.items()]
    return rows
