"""Position schemes behind one interface: sinusoidal, learned, rotary (RoPE), ALiBi or none.

A scheme is one object, built once per sequence side by the builder. The network calls its
embedding hook; every self-attention module over that side holds the same object and calls its
attention hooks. Each hook defaults to "do nothing", so a scheme overrides only the ways it acts:

- ``forward(x (B, T, D), offset) -> (B, T, D)``: add absolute positions to the (scaled) token
  embeddings (sinusoidal, learned).
- ``rotate(x (B, H, T, d_head), offset) -> same``: transform queries and keys before the dot
  product (RoPE).
- ``score_bias(t, s, offset, device) -> (H, T, S) float32 | None``: a bias added to the scaled
  scores (ALiBi; a T5-style relative bias would go here too).

``offset`` is the absolute position of the first query (and, for ``forward``/``rotate``, of the
first new token): non-zero during KV-cached decoding, where keys 0..S-1 are already in the cache.
Every scheme is built by ``scheme(sizes, **options)``: :class:`SchemeSizes` holds what the model fixes
(width, heads, head size, table length, and whether the side is causal); a scheme's own options
(e.g. RoPE's ``base``) are keyword arguments with defaults. A new scheme is one class here, its word
in the ``Positions`` axis and one entry in ``lit_models.registries.POSITIONS``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from lit_models.blocks.rope_scaling import RopeScale, rope_frequencies

NO_SCALING = RopeScale()
"""Plain RoPE: the identity scaling."""


@dataclass(frozen=True)
class SchemeSizes:
    """What the model fixes for a scheme: width D, h heads of width d_head (D = h·d_head, Vaswani §3.2.2),
    the longest sequence a table must hold, and whether the side is causal (decoder) or bidirectional."""

    d_model: int
    heads: int
    d_head: int
    max_len: int
    causal: bool


def sinusoid_table(length: int, d_model: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)) (Vaswani §3.5).

    Returns:
        (length, d_model) float32 table. An odd d_model drops the last cosine column.
    """
    pos = torch.arange(length, dtype=torch.float64)[:, None]  # (L, 1)
    inv = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    table = torch.zeros(length, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(pos * inv)
    table[:, 1::2] = torch.cos(pos * inv)[:, : d_model // 2]
    return table.float()


class PositionScheme(nn.Module):
    """The 'none' arm and the base of every scheme: no position information at all.

    Without positions, self-attention is permutation-equivariant (a causal mask still lets a
    decoder infer position; Kazemnejad et al. 2023).

    Args:
        sizes: what the model fixes (every scheme takes it; this arm reads none of it). A subclass adds
            its own options as keyword arguments with defaults, passed by ``builders.build_positions``
            from ``TransformerSpec.position_options``.
    """

    max_len: int | None = None
    """The most positions the scheme can encode (None: no limit)."""

    def __init__(self, sizes: SchemeSizes) -> None:
        super().__init__()

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Embedding hook: x (B, T, D) -> (B, T, D)."""
        return x

    def rotate(self, x: Tensor, offset: int = 0) -> Tensor:
        """Query/key hook: x (B, H, T, d_head) -> (B, H, T, d_head)."""
        return x

    def score_bias(self, *, t: int, s: int, offset: int, device: torch.device) -> Tensor | None:
        """Score hook: (H, T, S) float32 bias for queries at offset..offset+T-1 and keys 0..S-1, or None."""
        return None


class SinusoidalPositions(PositionScheme):
    """Fixed sinusoids added to the embeddings; the table grows on demand (no length limit)."""

    def __init__(self, sizes: SchemeSizes) -> None:
        super().__init__(sizes)
        self.d_model = sizes.d_model
        self.register_buffer("table", sinusoid_table(512, sizes.d_model), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        end = offset + x.size(1)
        if end > self.table.size(0):
            self.table = sinusoid_table(2 * end, self.d_model).to(self.table.device)
        return x + self.table[offset:end].to(x.dtype)


class LearnedPositions(PositionScheme):
    """A learned absolute position table of ``max_len`` rows (Gehring 2017; Vaswani Table 3 row E)."""

    def __init__(self, sizes: SchemeSizes) -> None:
        super().__init__(sizes)
        self.max_len = sizes.max_len
        self.table = nn.Embedding(sizes.max_len, sizes.d_model)
        nn.init.normal_(self.table.weight, std=sizes.d_model**-0.5)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        end = offset + x.size(1)
        if end > self.max_len:
            raise ValueError(
                f"sequence length {end} exceeds the learned position table (max_len={self.max_len}); "
                "raise --model.max_positions or use another --model.positions"
            )
        return x + self.table.weight[offset:end].to(x.dtype)


class RotaryEmbedding(nn.Module):
    """RoPE (Su et al. 2021, eq. 34): rotate each pair (x_2i, x_2i+1) of q and k by angle pos·θ_i.

    θ_i = base^(-2i/d_head). Scores q_mᵀ k_n then depend on positions only through m − n.
    Pairs are interleaved (2i, 2i+1) as in the paper. ``scaling`` (``blocks.rope_scaling``) replaces the θ_i
    and multiplies the rotated vectors by its magnitude, in evaluation mode only unless its ``in_training`` or
    inside :func:`scaling_in_training` (a fine-tune at the extended length).
    """

    def __init__(self, *, d_head: int, base: float = 10000.0, scaling: RopeScale = NO_SCALING) -> None:
        super().__init__()
        if d_head % 2:
            raise ValueError(f"rope needs an even head size, got d_head={d_head}")
        self.register_buffer("inv_freq", rope_frequencies(d_head, base).float(), persistent=False)
        self.register_buffer("scaled_freq", scaling.frequencies(d_head, base).float(), persistent=False)
        self.scaling = scaling
        self.fine_tuning = False  # set by scaling_in_training only

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x: (B, H, T, d_head) -> rotated (B, H, T, d_head)."""
        scaled = self.scaling.in_training or self.fine_tuning or not self.training
        t = x.size(-2)
        pos = torch.arange(offset, offset + t, device=x.device, dtype=torch.float32)
        angle = pos[:, None] * (self.scaled_freq if scaled else self.inv_freq)[None, :]  # (T, d_head/2)
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        x1, x2 = x[..., 0::2], x[..., 1::2]  # (B, H, T, d_head/2)
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
        magnitude = self.scaling.magnitude() if scaled else 1.0
        return out if magnitude == 1.0 else out * magnitude


@contextmanager
def scaling_in_training(module: nn.Module, on: bool = True) -> Iterator[None]:
    """While inside, every :class:`RotaryEmbedding` in ``module`` applies its scaling in training mode too (when
    ``on``): the forward passes of a fine-tune at the extended length (Chen et al. 2023 §3.2). Outside, each is as
    its ``scaling.in_training`` says."""
    ropes = [m for m in module.modules() if isinstance(m, RotaryEmbedding)] if on else []
    for rope in ropes:
        rope.fine_tuning = True
    try:
        yield
    finally:
        for rope in ropes:
            rope.fine_tuning = False


class RotaryPositions(PositionScheme):
    """RoPE arm: nothing is added to the embeddings; self-attention rotates q and k.

    Options: ``base`` of the frequencies θ_i (Su et al. 2021: 10000); ``scaling``, the resolved RoPE
    scaling (``blocks.rope_scaling``; the builder passes it from the spec's ``rope_scaling`` axis).
    """

    def __init__(self, sizes: SchemeSizes, *, base: float = 10000.0, scaling: RopeScale = NO_SCALING) -> None:
        super().__init__(sizes)
        self.rope = RotaryEmbedding(d_head=sizes.d_head, base=base, scaling=scaling)

    def rotate(self, x: Tensor, offset: int = 0) -> Tensor:
        return self.rope(x, offset)


def alibi_slopes(heads: int) -> Tensor:
    """Head slopes of ALiBi (Press et al. 2022, §3): the geometric sequence 2^(-8/n), 2^(-16/n), ...

    For n heads that is not a power of two, the paper takes the 2^k slopes of the largest power of
    two below n, then every other slope of the 2^(k+1) sequence for the remaining heads.
    """
    def geometric(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]

    low = 2 ** int(math.floor(math.log2(heads)))
    slopes = geometric(low) + geometric(2 * low)[0::2][: heads - low]
    return torch.tensor(slopes, dtype=torch.float32)


class ALiBiPositions(PositionScheme):
    """ALiBi (Press et al. 2022, eq. in §3): no embeddings added; score_ij += -m_h · |i − j|.

    The paper defines the causal form (keys j ≤ i, bias -m_h·(i − j)); under a causal mask the
    symmetric |i − j| used here is exactly that. In an encoder (no causal mask) |i − j| is the
    bidirectional form — a common extension, not in the paper.
    """

    def __init__(self, sizes: SchemeSizes) -> None:
        super().__init__(sizes)
        self.register_buffer("slopes", alibi_slopes(sizes.heads), persistent=False)

    def score_bias(self, *, t: int, s: int, offset: int, device: torch.device) -> Tensor | None:
        i = torch.arange(offset, offset + t, device=device, dtype=torch.float32)  # query positions
        j = torch.arange(s, device=device, dtype=torch.float32)  # key positions
        return -self.slopes.to(device)[:, None, None] * (i[:, None] - j[None, :]).abs()  # (H, T, S)
