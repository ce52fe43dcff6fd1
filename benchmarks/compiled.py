"""Section: ``torch.compile`` (inductor; on CPU it emits C++/OpenMP kernels) vs eager, with the
compile time next to the speed-up.

- training: one step (``benchmarks.training.train_step_fn``) in each selected precision with each
  system's loss closure (forward + label-smoothed loss; backward through the compiled graph)
  compiled, as ``gpu.py`` does.
- decoding: attnlab's greedy search with the KV-cached ``step()`` compiled. The cache grows by one
  position per step, so the first call compiles for length 1 and the second recompiles with a
  dynamic length (``dynamic=True`` from the start gives the same graphs): a fixed number of graphs
  per run, not one per step (``graphs`` counts them). Marian's ``generate`` is left eager: compiling
  it needs Hugging Face's static cache, a different decoding path.

``compile_s`` = the compiled system's first call − the median eager call (the first call compiles,
then runs once), with empty inductor caches (a config's first run); ``warm_compile_s`` the same after
a dynamo reset with inductor's on-disk caches filled (what a sweep's later trials of the same shapes
pay). ``break_even`` = compile_s / (eager − compiled per call), ``warm_break_even`` likewise: after
that many steps (training) or batches (decoding) the compiled run has caught up; ``inf`` when it is
not faster.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from types import SimpleNamespace

import torch

from attnlab_core.tokens import BOS, EOS, PAD
from benchmarks.common import Size, interleaved_times, random_pair
from benchmarks.systems import BUILDERS, System
from benchmarks.training import train_step_fn
from lit_models.blocks.decoding import greedy

log = logging.getLogger(__name__)


def compile_loss(system: System, *, dynamic: bool | None = None) -> System:
    """The same system with its training loss (forward + loss; backward follows it) compiled."""
    return dataclasses.replace(system, loss=torch.compile(system.loss, dynamic=dynamic))


def compiled_greedy(net: torch.nn.Module) -> Callable[[torch.Tensor, int], torch.Tensor]:
    """Greedy decoding of ``net`` (an attnlab encoder-decoder) through a compiled ``step()``."""
    stepper = SimpleNamespace(step=torch.compile(net.step, dynamic=True))

    @torch.no_grad()
    def decode(src: torch.Tensor, length: int) -> torch.Tensor:
        max_len = torch.full((src.size(0),), length, dtype=torch.long, device=src.device)
        return greedy(stepper, net.encode(src), max_len=max_len, bos=BOS, eos=EOS, pad=PAD)

    return decode


def _first_call(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _pair_rows(base: dict, tokens: int, fns: dict[str, Callable[[], object]], timing: dict) -> list[dict]:
    """Time eager and compiled: first calls (compiled twice: cold, then warm), then round-robin calls."""
    from torch._inductor.utils import fresh_inductor_cache  # torch >= 2.4 (later also named fresh_cache)

    torch._dynamo.reset()
    with fresh_inductor_cache():  # an empty inductor cache: the cost of a config's first run
        eager_first = _first_call(fns["eager"])
        before = _graphs()  # dynamo's counters survive a reset
        cold, compiled_out = _first_call(fns["compiled"])
        graphs = _graphs() - before
        torch._dynamo.reset()  # the on-disk caches stay: the cost of a sweep's later trials
        warm, _ = _first_call(fns["compiled"])
        secs = interleaved_times(fns, **timing)
    outs = {"eager": eager_first[1], "compiled": compiled_out}
    rows = [{**base, "mode": mode, "call_s": t, "tokens_per_s": tokens / t, "speedup": secs["eager"] / t,
             "first_out": _scalar(outs[mode])} for mode, t in secs.items()]
    gain = secs["eager"] - secs["compiled"]
    for key, first in (("compile_s", cold), ("warm_compile_s", warm)):
        rows[1][key] = max(0.0, first - secs["eager"])
        rows[1][key.replace("compile_s", "break_even")] = rows[1][key] / gain if gain > 0 else float("inf")
    rows[1]["graphs"] = graphs
    log.info("compile %s %s %s: %.2fx eager, compile %.1f s (warm %.1f s), %d graphs", base["kind"], base["size"],
             base["system"], rows[1]["speedup"], rows[1]["compile_s"], rows[1]["warm_compile_s"], graphs)
    return rows


def _graphs() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def _scalar(out: object) -> float:
    """A training step's loss, or the sum of a decode's token ids (a checksum: eager and compiled agree)."""
    out = torch.as_tensor(out)
    return float(out) if out.dim() == 0 else float(out.sum())


def bench_compile_training(size: Size, systems: list[str], timing: dict, precisions: tuple[str, ...] = ("fp32",)
                           ) -> list[dict]:
    """Rows {kind: "train <precision>", size, system, mode, call_s, tokens_per_s, speedup, compile_s, ...}."""
    src, tgt = random_pair(size)
    rows = []
    for precision in precisions:
        for name in systems:
            built = {}
            for mode in ("eager", "compiled"):
                torch.manual_seed(0)
                system = BUILDERS[name](size)
                built[mode] = compile_loss(system) if mode == "compiled" else system
            fns = {mode: train_step_fn(s, src, tgt, precision) for mode, s in built.items()}
            rows += _pair_rows({"kind": f"train {precision}", "size": size.name, "system": name},
                               size.batch * size.length, fns, timing)
    return rows


def bench_compile_decoding(size: Size, timing: dict) -> list[dict]:
    """attnlab greedy decoding (B × length tokens per call), eager vs compiled ``step()``."""
    src, _ = random_pair(size, seed=1)
    torch.manual_seed(0)
    system = BUILDERS["attnlab"](size)
    system.module.eval()
    fast = compiled_greedy(system.module)
    fns = {"eager": lambda: system.decode(src, 1, size.length), "compiled": lambda: fast(src, size.length)}
    return _pair_rows({"kind": "decode greedy", "size": size.name, "system": "attnlab"}, size.batch * size.length,
                      fns, timing)


def bench_compile(size: Size, systems: list[str], *, rounds: int, steps: int, warmup: int,
                  precisions: tuple[str, ...] = ("fp32",)) -> list[dict]:
    """Training (every selected system, each precision) and attnlab greedy decoding, eager vs ``torch.compile``."""
    timing = dict(rounds=rounds, steps=steps, warmup=warmup)
    return bench_compile_training(size, systems, timing, precisions) + bench_compile_decoding(size, timing)
