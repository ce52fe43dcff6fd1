"""Section 3: greedy and beam-4 decoding tokens/s, attnlab ``blocks.decoding`` vs ``MarianMTModel.generate``.

Both models are random-init with the EOS logit biased to -1e4, so every hypothesis runs to the
same output length L (EOS forced at the end) and both do the same number of steps. Tokens/s
counts B × L output tokens per second (beams are not counted as extra tokens). The encoder
pass is included in the time.
"""

from __future__ import annotations

import logging

import torch

from benchmarks.common import Size, interleaved_times, random_pair
from benchmarks.systems import BUILDERS

log = logging.getLogger(__name__)


def _generated_length(name: str, out: torch.Tensor) -> int:
    """Output tokens per row (Marian's output starts with the decoder start token)."""
    return int(out.size(1)) - (1 if name == "marian" else 0)


def bench_decoding(
    sizes: list[Size], systems: list[str], beams: list[int], *, rounds: int, steps: int, warmup: int,
    device: str = "cpu",
) -> list[dict]:
    """Rows {size, beam, system, decode_s, tokens_per_s, out_len}."""
    rows: list[dict] = []
    for size in sizes:
        src, _ = random_pair(size, seed=1, device=device)
        built = {}
        for name in systems:
            torch.manual_seed(0)
            built[name] = BUILDERS[name](size)
            built[name].module.to(device).eval()
        for beam in beams:
            fns = {name: (lambda s=s, b=beam, x=src, n=size.length: s.decode(x, b, n)) for name, s in built.items()}
            lengths = {name: _generated_length(name, fn()) for name, fn in fns.items()}
            secs = interleaved_times(fns, warmup=warmup, rounds=rounds, steps=steps, device=device)
            for name, t in secs.items():
                rows.append({"size": size.name, "beam": beam, "system": name, "decode_s": t,
                             "tokens_per_s": size.batch * size.length / t, "out_len": lengths[name]})
                log.info("decode %s beam %d %s: %.0f tok/s", size.name, beam, name, rows[-1]["tokens_per_s"])
    return rows
