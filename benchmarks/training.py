"""Section 2: training throughput and utilisation of attnlab vs torch.nn.Transformer vs MarianMTModel.

One training step = forward (teacher-forced, under bf16 autocast for ``bf16``), label-smoothed
loss, backward, AdamW step (each system's usual AdamW: fused for attnlab and Marian, torch's default
for torch.nn.Transformer; ``benchmarks.optimizer`` times the forms side by side). Tokens/s counts
target tokens (B × T) per second. FLOPs per step are counted once per system with
``torch.utils.flop_counter.FlopCounterMode`` (matmuls and attention, forward + backward); achieved
FLOP/s ÷ the matmul ceiling of the row's precision is the utilisation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

from benchmarks.common import Precision, Size, autocast, ceiling_key, interleaved_times, model_dtype, random_pair
from benchmarks.systems import BUILDERS, System

log = logging.getLogger(__name__)
SLOW_STEP_S = 30.0
MAX_STEP_S = 60.0  # rows whose step would take longer at the matmul ceiling are skipped (bf16 without bf16 GEMM)


def train_step_fn(system: System, src: torch.Tensor, tgt: torch.Tensor, precision: Precision,
                  device: str = "cpu") -> Callable[[], float]:
    """A closure running one full optimisation step; returns the loss as a float.

    ``bf16-true`` moves the module's weights to bf16 in place (as Lightning's ``bf16-true`` does; AdamW's
    state then is bf16 too); the loss is float32 either way (``label_smoothed_loss`` casts the logits).
    """
    system.module.to(device=device, dtype=model_dtype(precision)).train()
    opt = system.optimizer(system.module.parameters())

    def step() -> float:
        with autocast(precision, device.split(":")[0]):
            loss = system.loss(src, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def count_flops(system: System, src: torch.Tensor, tgt: torch.Tensor) -> int:
    """FLOPs of one forward + backward pass (optimizer excluded)."""
    with FlopCounterMode(display=False) as counter:
        system.loss(src, tgt).backward()
    system.module.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


def bench_training(
    sizes: list[Size], systems: list[str], precisions: list[Precision], ceiling: dict[str, float], *,
    rounds: int, steps: int, warmup: int, device: str = "cpu", skipped: list[dict] | None = None,
) -> list[dict]:
    """Rows {size, precision, system, step_s, tokens_per_s, gflop_per_step, achieved_gflops, utilisation};
    ``skipped`` collects (size, precision) pairs whose estimated step time exceeds ``MAX_STEP_S``."""
    rows: list[dict] = []
    skipped = [] if skipped is None else skipped
    for size in sizes:
        src, tgt = random_pair(size, device=device)
        built = {}
        for name in systems:
            torch.manual_seed(0)
            built[name] = BUILDERS[name](size)
            built[name].module.to(device)
        flops = {name: count_flops(s, src, tgt) for name, s in built.items()}
        for precision in precisions:
            estimate = max(flops.values()) / 1e9 / ceiling[ceiling_key(precision)]  # seconds per step at the ceiling
            if estimate > MAX_STEP_S:
                log.info("train %s %s skipped: ~%.0f s per step at the %s matmul ceiling", size.name, precision,
                         estimate, precision)
                skipped.append({"size": size.name, "precision": precision, "estimated_step_s": estimate})
                continue
            fns = {name: train_step_fn(s, src, tgt, precision, device) for name, s in built.items()}
            losses, first = {}, {}
            for name, fn in fns.items():
                start = time.perf_counter()
                losses[name] = float(fn())
                first[name] = time.perf_counter() - start
            if max(first.values()) > SLOW_STEP_S:  # e.g. bf16 on a CPU without bf16 GEMM: one step is all we afford
                log.info("train %s %s: a step takes > %.0f s; the first step is the measurement", size.name,
                         precision, SLOW_STEP_S)
                secs = first
            else:
                secs = interleaved_times(fns, warmup=warmup, rounds=rounds, steps=steps, device=device)
            for s in built.values():  # the next precision starts from fp32 weights again
                s.module.float()
            for name, t in secs.items():
                achieved = flops[name] / t / 1e9
                rows.append({
                    "size": size.name, "precision": precision, "system": name, "step_s": t,
                    "tokens_per_s": size.batch * size.length / t, "gflop_per_step": flops[name] / 1e9,
                    "achieved_gflops": achieved, "utilisation": achieved / ceiling[ceiling_key(precision)],
                    "first_loss": losses[name],
                })
                log.info("train %s %s %s: %.0f tok/s (%.0f ms/step)", size.name, precision, name,
                         rows[-1]["tokens_per_s"], t * 1e3)
        del built
    return rows
