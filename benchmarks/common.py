"""Shared helpers: sizes, precision contexts, interleaved timing, random batches."""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from attnlab_core.tokens import BOS, EOS

Precision = str  # "fp32" | "bf16" (bf16-mixed: autocast) | "bf16-true" (weights and optimizer state in bf16)
PRECISIONS = ("fp32", "bf16", "bf16-true")
FIRST_CONTENT_ID = 4  # ids 0..3 are PAD, BOS, EOS, UNK


@dataclass(frozen=True)
class Size:
    """One model size and its training batch (B sequences of length T on both sides)."""

    name: str
    d_model: int
    heads: int
    d_ff: int
    layers: int
    vocab: int
    batch: int
    length: int

    def as_dict(self) -> dict:
        return asdict(self)


SIZES = {
    "small": Size("small", d_model=256, heads=4, d_ff=1024, layers=3, vocab=8000, batch=32, length=32),
    "base": Size("base", d_model=512, heads=8, d_ff=2048, layers=6, vocab=8000, batch=16, length=32),
}
QUICK_SIZES = {
    "tiny": Size("tiny", d_model=32, heads=4, d_ff=64, layers=1, vocab=64, batch=4, length=8),
}


def ceiling_key(precision: Precision) -> str:
    """The matmul ceiling a precision's utilisation is measured against (``fp32`` or ``bf16``)."""
    return "fp32" if precision == "fp32" else "bf16"


def model_dtype(precision: Precision) -> torch.dtype:
    """The dtype of the weights: bf16 for ``bf16-true`` (Lightning's ``--trainer.precision bf16-true``)."""
    return torch.bfloat16 if precision == "bf16-true" else torch.float32


def autocast(precision: Precision, device: str = "cpu") -> contextlib.AbstractContextManager:
    """bf16 autocast (the ``bf16-mixed`` Lightning precision) or a no-op (fp32, and bf16-true: bf16 weights)."""
    if precision == "bf16":
        return torch.autocast(device_type=device, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def random_pair(size: Size, *, seed: int = 0, device: str = "cpu") -> tuple[Tensor, Tensor]:
    """src (B, T) content ids; tgt (B, T + 1) = [BOS, content ..., EOS] with no padding."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(FIRST_CONTENT_ID, size.vocab, (size.batch, size.length), generator=g)
    body = torch.randint(FIRST_CONTENT_ID, size.vocab, (size.batch, size.length - 1), generator=g)
    bos = torch.full((size.batch, 1), BOS)
    eos = torch.full((size.batch, 1), EOS)
    return src.to(device), torch.cat([bos, body, eos], dim=1).to(device)


def sync(device: str) -> None:
    """Wait for queued kernels (GPU); a no-op on CPU."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def interleaved_times(
    fns: dict[str, Callable[[], object]], *, warmup: int, rounds: int, steps: int, device: str = "cpu"
) -> dict[str, float]:
    """Median seconds per call of each function, timed round-robin so machine load hits all alike.

    Args:
        fns: name -> a zero-argument callable (one training step, one decode, ...).
        warmup: untimed calls of each function first.
        rounds: timing rounds; in each round every function runs ``steps`` times in turn.
    Returns:
        name -> median over rounds of (round time / steps).
    """
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    sync(device)
    per_round: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(steps):
                fn()
            sync(device)
            per_round[name].append((time.perf_counter() - start) / steps)
    return {name: statistics.median(ts) for name, ts in per_round.items()}


@contextlib.contextmanager
def threads(n: int) -> Iterator[None]:
    """Run with ``n`` intra-op threads, restoring the previous setting."""
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def no_eos_bias(linear: torch.nn.Linear) -> None:
    """Make EOS (almost) never chosen, so random-init decoders run to their length limit."""
    with torch.no_grad():
        linear.bias[EOS] = -1e4
