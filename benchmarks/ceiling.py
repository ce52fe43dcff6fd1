"""Section 1: the machine's ceiling — dense matmul GFLOP/s in fp32 and bf16, measured in the same run."""

from __future__ import annotations

import time

import torch

from benchmarks.common import interleaved_times

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def matmul_ceiling(*, n: int, rounds: int, steps: int, device: str = "cpu") -> dict[str, float]:
    """GFLOP/s of an (n, n) @ (n, n) matmul per precision (2·n³ FLOPs per product).

    Returns:
        {"fp32": GFLOP/s, "bf16": GFLOP/s, "n": n}.
    """
    g = torch.Generator().manual_seed(0)
    mats = {k: (torch.randn(n, n, generator=g).to(device, dt), torch.randn(n, n, generator=g).to(device, dt))
            for k, dt in DTYPES.items()}
    fns = {k: (lambda a=a, b=b: torch.mm(a, b)) for k, (a, b) in mats.items()}
    secs = {}
    for k, fn in fns.items():  # a slow (non-native) kernel is timed once instead of rounds × steps
        start = time.perf_counter()
        fn()
        first = time.perf_counter() - start
        secs[k] = first if first > 1.0 else interleaved_times({k: fn}, warmup=1, rounds=rounds, steps=steps,
                                                               device=device)[k]
    out: dict[str, float] = {k: 2 * n**3 / t / 1e9 for k, t in secs.items()}
    out["n"] = n
    return out
