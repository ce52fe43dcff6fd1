"""Softmax saturation at initialisation as d_k grows: the mechanism behind Vaswani et al.'s 1/sqrt(d_k).

Vaswani et al. 2017, §3.2.1 footnote 4: if the components of q and k are independent with mean 0
and variance 1, q·k has variance d_k, so unscaled logits grow like sqrt(d_k) and push the softmax
into regions with extremely small gradients. This module computes that directly, with the suite's
own scale functions (``lit_models.registries.ATTN_SCALES``), for several d_k and every scale:
the attention entropy (divided by log S, so uniform = 1) and the gradient of a random upstream loss
with respect to the logits (the softmax Jacobian's size). Unit-variance q and k are what the
suite's LayerNorm inputs and Xavier-initialised projections give at step 0. No training: the
trained scaling arms (d_k = 128) show the consequence; this shows the trend in d_k, which a quick
preset cannot afford to train at every width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from ablations.verdicts.rules import Check
from lit_models.registries import ATTN_SCALES

D_KS = (16, 32, 64, 128, 256)
KEYS = 16  # source positions each query attends over
QUERIES = 4096
VALUE_DIM = 16


@dataclass(frozen=True)
class Point:
    """Entropy (fraction of log S) and mean logit-gradient norm for one scale at one d_k."""

    entropy: float
    grad: float


def at_init(scale: str, d_k: int, *, seed: int = 0) -> Point:
    """One (scale, d_k): softmax(q kᵀ · scale) over ``KEYS`` keys for ``QUERIES`` unit-variance queries."""
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(QUERIES, 1, d_k, generator=gen), torch.randn(QUERIES, KEYS, d_k, generator=gen)
    v = torch.randn(QUERIES, KEYS, VALUE_DIM, generator=gen)
    upstream = torch.randn(QUERIES, 1, VALUE_DIM, generator=gen)
    logits = (q @ k.transpose(1, 2) * ATTN_SCALES[scale](d_k)).requires_grad_()  # (N, 1, S), own keys per query
    p = logits.softmax(-1)
    ((p @ v) * upstream).sum().backward()
    entropy = -(p * p.clamp_min(1e-30).log()).sum(-1).mean().item() / math.log(KEYS)
    return Point(entropy=entropy, grad=logits.grad.norm(dim=-1).mean().item())


def table(scales: tuple[str, ...] = tuple(ATTN_SCALES)) -> dict[str, dict[int, Point]]:
    """scale -> d_k -> Point, for every d_k in ``D_KS``."""
    return {s: {d: at_init(s, d) for d in D_KS} for s in scales}


def check(points: dict[str, dict[int, Point]] | None = None) -> Check:
    """The footnote's claim: unscaled, entropy and logit gradients fall as d_k grows (16 -> 256) while
    1/sqrt(d_k) keeps both where they were; 1/d_k drifts to uniform (entropy -> 1, gradients shrink)."""
    pts = points or table()
    lo, hi = D_KS[0], D_KS[-1]
    none, sq = pts["none"], pts["sqrt_dk"]
    falls = none[hi].entropy < 0.5 * none[lo].entropy and none[hi].grad < 0.5 * none[lo].grad
    steady = abs(sq[hi].entropy - sq[lo].entropy) < 0.1 and sq[hi].grad > 0.5 * sq[lo].grad
    detail = "; ".join(
        f"{s}: entropy {p[lo].entropy:.2f}→{p[hi].entropy:.2f}, logit gradient {p[lo].grad:.3f}→{p[hi].grad:.3f}"
        for s, p in pts.items()
    )
    return Check(
        claim=f"at initialisation, as d_k grows {lo}→{hi}, unscaled softmax saturates (entropy and gradients "
        "fall) while 1/sqrt(d_k) holds them (unit-variance q, k; computed, no training)",
        answer="supported" if falls and steady else "not supported",
        detail=detail,
    )


def plot(out: Path, points: dict[str, dict[int, Point]] | None = None) -> Path:
    """Entropy and logit-gradient norm against d_k, one line per scale; returns the PNG path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = points or table()
    fig, (ax_e, ax_g) = plt.subplots(1, 2, figsize=(9, 3.4), constrained_layout=True)
    for scale, by_dk in pts.items():
        ax_e.plot(D_KS, [by_dk[d].entropy for d in D_KS], marker="o", label=scale)
        ax_g.plot(D_KS, [by_dk[d].grad for d in D_KS], marker="o", label=scale)
    for ax, ylabel in ((ax_e, "attention entropy / log S"), (ax_g, "‖∂L/∂logits‖ per query")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(D_KS, [str(d) for d in D_KS])
        ax.set_xlabel("d_k")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    ax_g.set_yscale("log")
    ax_e.legend(title="attn_scale")
    fig.suptitle("Softmax at initialisation (Vaswani et al. 2017, §3.2.1 fn. 4)")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
