"""Position information behind one interface: sinusoidal, learned, rotary (RoPE) or none.

Every scheme is a module ``forward(x (B, T, D), offset) -> (B, T, D)`` that adds absolute
positions to (already scaled) embeddings, and an attribute ``rotary`` that is a
``RotaryEmbedding`` for RoPE (applied to q and k inside self-attention) and None otherwise.
``offset`` is the position of x[:, 0] (non-zero during incremental decoding).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from lit_models.axes import Positions


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


class NoPositions(nn.Module):
    """No position information: attention is permutation-equivariant (the 'none' arm)."""

    def __init__(self) -> None:
        super().__init__()
        self.rotary: RotaryEmbedding | None = None  # an instance attribute: RoPE registers a module here

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        return x


class SinusoidalPositions(NoPositions):
    """Fixed sinusoids added to the embeddings; the table grows on demand (no length limit)."""

    def __init__(self, *, d_model: int) -> None:
        super().__init__()
        self.d_model = d_model
        self.register_buffer("table", sinusoid_table(512, d_model), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        end = offset + x.size(1)
        if end > self.table.size(0):
            self.table = sinusoid_table(2 * end, self.d_model).to(self.table.device)
        return x + self.table[offset:end].to(x.dtype)


class LearnedPositions(NoPositions):
    """A learned absolute position table of ``max_len`` rows (Gehring 2017; Vaswani Table 3 row E)."""

    def __init__(self, *, d_model: int, max_len: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.table = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.table.weight, std=d_model**-0.5)

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
    Pairs are interleaved (2i, 2i+1) as in the paper.
    """

    def __init__(self, *, d_head: int, base: float = 10000.0) -> None:
        super().__init__()
        if d_head % 2:
            raise ValueError(f"rope needs an even head size, got d_head={d_head}")
        inv = base ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x: (B, H, T, d_head) -> rotated (B, H, T, d_head)."""
        t = x.size(-2)
        pos = torch.arange(offset, offset + t, device=x.device, dtype=torch.float32)
        angle = pos[:, None] * self.inv_freq[None, :]  # (T, d_head/2)
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        x1, x2 = x[..., 0::2], x[..., 1::2]  # (B, H, T, d_head/2)
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
        return out.flatten(-2)


class RotaryPositions(NoPositions):
    """RoPE arm: nothing is added to embeddings; self-attention rotates q and k."""

    def __init__(self, *, d_head: int) -> None:
        super().__init__()
        self.rotary = RotaryEmbedding(d_head=d_head)


POSITIONS: dict[Positions, Callable[..., NoPositions]] = {
    "sinusoidal": lambda *, d_model, d_head, max_len: SinusoidalPositions(d_model=d_model),
    "learned": lambda *, d_model, d_head, max_len: LearnedPositions(d_model=d_model, max_len=max_len),
    "rope": lambda *, d_model, d_head, max_len: RotaryPositions(d_head=d_head),
    "none": lambda *, d_model, d_head, max_len: NoPositions(),
}
