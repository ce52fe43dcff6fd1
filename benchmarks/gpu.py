"""Section 6 (only with CUDA): tokens/s and MFU of transformer_base and transformer_big in bf16,
``torch.compile`` off and on, written to its own JSON next to the CPU results.

MFU = counted FLOPs per step / step time / the measured bf16 matmul ceiling of the same GPU
(8192² matmul), so it is comparable with the CPU utilisation column.
"""

from __future__ import annotations

import torch

from benchmarks.ceiling import matmul_ceiling
from benchmarks.common import Size, interleaved_times, random_pair
from benchmarks.systems import build_attnlab
from benchmarks.training import count_flops, train_step_fn

GPU_SIZES = {
    "transformer_base": Size("transformer_base", d_model=512, heads=8, d_ff=2048, layers=6, vocab=37000,
                             batch=128, length=64),
    "transformer_big": Size("transformer_big", d_model=1024, heads=16, d_ff=4096, layers=6, vocab=37000,
                            batch=64, length=64),
}


def bench_gpu(*, rounds: int, steps: int, warmup: int, sizes: dict[str, Size] | None = None) -> dict:
    """{"ceiling": ..., "rows": [{size, compile, step_s, tokens_per_s, mfu}]} or {"skipped": why}."""
    if not torch.cuda.is_available():
        return {"skipped": "CUDA is not available"}
    device = "cuda"
    ceiling = matmul_ceiling(n=8192, rounds=3, steps=5, device=device)
    rows = []
    for size in (sizes or GPU_SIZES).values():
        src, tgt = random_pair(size, device=device)
        for compiled in (False, True):
            torch.manual_seed(0)
            system = build_attnlab(size)
            system.module.to(device)
            flops = count_flops(system, src, tgt)
            if compiled:
                system.loss = torch.compile(system.loss)
            fn = train_step_fn(system, src, tgt, "bf16", device)
            t = interleaved_times({"x": fn}, warmup=warmup, rounds=rounds, steps=steps, device=device)["x"]
            rows.append({"size": size.name, "compile": compiled, "step_s": t,
                         "tokens_per_s": size.batch * size.length / t,
                         "mfu": flops / t / 1e9 / ceiling["bf16"], "gflop_per_step": flops / 1e9})
            del system, fn
            torch.cuda.empty_cache()
    return {"device": torch.cuda.get_device_name(), "ceiling": ceiling, "rows": rows}
