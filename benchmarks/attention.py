"""Section 4: peak memory and time of one attention layer vs sequence length, SDPA vs explicit path.

The layer is ``lit_models.blocks.attention.MultiHeadAttention`` (self-attention, no mask,
batch 1): the SDPA path is ``need_weights=False`` (``F.scaled_dot_product_attention``), the
explicit path ``need_weights=True`` (softmax(QKᵀ)V materialising the (H, T, T) weights).
Memory is measured in a fresh subprocess per point, after one warm-up pass, as the peak growth of
the resident set (``/proc/self/statm`` sampled every 0.2 ms by a thread while the ops run without the
GIL) over a forward + backward pass; CPU torch has no allocator statistics. Linux only.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
import warnings

PROBE = r"""
import json, os, sys, threading, time
import torch
from lit_models.blocks.attention import AttentionOptions, MultiHeadAttention
length, d_model, heads, explicit, threads = (int(a) for a in sys.argv[1:6])
torch.set_num_threads(threads)
torch.manual_seed(0)
page = os.sysconf("SC_PAGE_SIZE")
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page
layer = MultiHeadAttention(AttentionOptions(heads=heads, d_head=d_model // heads, scale=(d_model // heads) ** -0.5,
                                            attn_dropout=0.0, kv_heads=heads))
x = torch.randn(1, length, d_model, requires_grad=True)
def run():
    q, k, v = layer.project_qkv(x)
    out, _ = layer.attend(q, k, v, mask=None, need_weights=bool(explicit))
    out.sum().backward()
run()
x.grad = None
layer.zero_grad(set_to_none=True)
peak, stop = [0], threading.Event()
def sample():
    while not stop.is_set():
        peak[0] = max(peak[0], rss())
        time.sleep(0.0002)
before = rss()
sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
start = time.perf_counter(); run(); elapsed = time.perf_counter() - start
stop.set(); sampler.join()
peak[0] = max(peak[0], rss())
print(json.dumps({"peak_mib": (peak[0] - before) / 2**20, "time_s": elapsed}))
"""


def _probe(length: int, *, d_model: int, heads: int, explicit: bool, threads: int) -> dict:
    args = [sys.executable, "-c", PROBE, str(length), str(d_model), str(heads), str(int(explicit)), str(threads)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"rc {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def explicit_bytes(length: int, heads: int) -> int:
    """Bytes of one fp32 (1, H, T, T) weight tensor (the explicit path holds several)."""
    return 4 * heads * length * length


def bench_attention_memory(
    lengths: list[int], *, d_model: int, heads: int, threads: int, explicit_limit_mib: float
) -> list[dict]:
    """Rows {length, path, peak_mib, time_s}; explicit points above ``explicit_limit_mib`` per weight
    tensor are skipped (recorded with ``skipped``) to keep the shared machine alive."""
    rows: list[dict] = []
    for length in lengths:
        for path in ("sdpa", "explicit"):
            row = {"length": length, "path": path}
            if path == "explicit" and explicit_bytes(length, heads) / 2**20 > explicit_limit_mib:
                row["skipped"] = f"(H,T,T) weights alone need {explicit_bytes(length, heads) / 2**20:.0f} MiB"
            else:
                start = time.perf_counter()
                row.update(_probe(length, d_model=d_model, heads=heads, explicit=path == "explicit",
                                  threads=threads))
                row["wall_s"] = time.perf_counter() - start
            rows.append(row)
    return rows


def linear_fit(rows: list[dict], path: str = "sdpa") -> dict[str, float]:
    """Memory growth exponent of ``path``: least-squares slope of log(peak MiB) on log(length).

    1 means linear, 2 quadratic. Returns {"exponent", "points"}; NaN with fewer than two points.
    """
    pts = [(math.log(r["length"]), math.log(r["peak_mib"])) for r in rows
           if r["path"] == path and r.get("peak_mib", 0) > 0]
    if len(pts) < 2:
        return {"exponent": float("nan"), "points": len(pts)}
    mx, my = sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
    slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    return {"exponent": slope, "points": len(pts)}


def bench_vmap_attention(*, seeds: int, batch: int, heads: int, length: int, d_head: int, rounds: int) -> dict:
    """Causal SDPA forward + backward for ``seeds`` stacked seeds: under ``torch.func.vmap`` (as a stacked model
    runs it, ``lit_models.training.stacking``) against one call on the seeds folded into the batch. CPU SDPA has no vmap
    batching rule, so vmap falls back to one call per seed; the ratio is that fallback's cost."""
    import torch
    from torch.func import vmap

    from lit_models.blocks.attention import scaled_dot_product

    def sdpa(q, k, v):
        return scaled_dot_product(q, k, v, mask=None, scale=d_head ** -0.5, dropout_p=0.0, need_weights=False,
                                  is_causal=True)[0]

    qkv = [torch.randn(seeds, batch, heads, length, d_head, requires_grad=True) for _ in range(3)]
    ways = {"vmap": lambda: vmap(sdpa)(*qkv), "folded": lambda: sdpa(*(t.flatten(0, 1) for t in qkv))}
    best = {}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="There is a performance drop")  # the fallback measured here
        for name, run in ways.items():
            run().sum().backward()  # warm-up
            times = []
            for _ in range(rounds):
                start = time.perf_counter()
                run().sum().backward()
                times.append(time.perf_counter() - start)
            best[f"{name}_ms"] = min(times) * 1e3
    return {"seeds": seeds, "batch": batch, "heads": heads, "length": length, "d_head": d_head, **best,
            "ratio": best["vmap_ms"] / best["folded_ms"]}
