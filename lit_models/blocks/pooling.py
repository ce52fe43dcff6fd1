"""Sequence pooling: encoder states (B, S, D) -> one vector (B, D) per example, for classification.

Every pooling is a module ``forward(states (B, S, D), mask (B, S)) -> PoolOut(pooled, weights)``
with **mask True = real token** (right padding, as everywhere in attnlab). ``weights`` (B, S) say
how much each position contributed (the token-importance figure draws them); they are exactly zero
on padding and sum to 1 over the real tokens, or are None where no such reading exists.

- ``last``: the final state of each direction: the forward half at the last real token, the
  backward half at the first (for a bidirectional recurrent encoder this is [h_fwd_T; h_bwd_1],
  the classic read-out; Maini et al. 2020 show its positional bias on long inputs).
- ``mean``: average over real tokens.
- ``max``: element-wise max over real tokens (Collobert et al. 2011; Conneau et al. 2017).
- ``attention``: additive attention pooling with a learned context vector (Yang et al. 2016, HAN,
  eq. 5-7: u_t = tanh(W h_t + b), α_t = softmax_t(u_tᵀ u_w), s = Σ_t α_t h_t; the single-hop case of
  Lin et al. 2017's self-attentive embedding).
- ``cls``: the state of a learned summary token prepended to the input (Devlin et al. 2019); the
  classifier prepends it (``lit_models.registries.PREPENDS_CLS``), the pooling reads position 0.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from lit_models.blocks.alignment import masked_log_alpha


class PoolOut(NamedTuple):
    """pooled (B, D); weights (B, S) float32 contribution of each position, or None."""

    pooled: Tensor
    weights: Tensor | None


class LastPooling(nn.Module):
    """Final state of each direction: forward features at the last real token, backward at the first.

    Args:
        directions: 1 (unidirectional / Transformer: the state at the last real token) or 2 (the
            first D/2 features are the forward direction, the rest the backward one, as
            ``nn.LSTM(bidirectional=True)`` lays them out).
    """

    def __init__(self, *, directions: int) -> None:
        super().__init__()
        self.directions = directions

    def forward(self, states: Tensor, mask: Tensor) -> PoolOut:
        b = states.size(0)
        rows = torch.arange(b, device=states.device)
        last = (mask.sum(1) - 1).clamp_min(0)  # (B,)
        forward_last = states[rows, last]  # (B, D)
        if self.directions == 1:
            return PoolOut(forward_last, None)
        half = states.size(-1) // 2
        return PoolOut(torch.cat([forward_last[:, :half], states[:, 0, half:]], dim=-1), None)


class MeanPooling(nn.Module):
    """Average of the real tokens' states; weights are 1/n on the n real tokens."""

    def forward(self, states: Tensor, mask: Tensor) -> PoolOut:
        weights = mask.float() / mask.sum(1, keepdim=True).clamp_min(1)  # (B, S)
        return PoolOut(torch.einsum("bs,bsd->bd", weights.to(states.dtype), states), weights)


class MaxPooling(nn.Module):
    """Element-wise max over real tokens; weights = share of the D features each position won."""

    def forward(self, states: Tensor, mask: Tensor) -> PoolOut:
        masked = states.masked_fill(~mask.unsqueeze(-1), float("-inf"))  # (B, S, D)
        pooled, arg = masked.max(dim=1)  # (B, D), (B, D)
        pooled = torch.where(mask.any(1, keepdim=True), pooled, torch.zeros_like(pooled))
        wins = torch.zeros(mask.shape, device=states.device).scatter_add_(
            1, arg, torch.ones(arg.shape, device=states.device)
        )  # (B, S)
        return PoolOut(pooled, wins / states.size(-1) * mask.any(1, keepdim=True))


class AttentionPooling(nn.Module):
    """Additive attention pooling with a learned context vector (Yang et al. 2016, eq. 5-7).

        u_t = tanh(W h_t + b),   α_t = softmax_t(u_tᵀ u_w) over real tokens,   s = Σ_t α_t h_t

    Softmax in float32 via ``masked_log_alpha``: padding gets exactly zero weight; an empty row gets
    zero weights and a zero vector (never NaN).

    Args:
        d_in: D, the state size. attn_size: size of u_t (HAN uses 100 for word attention).
    """

    def __init__(self, *, d_in: int, attn_size: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d_in, attn_size)
        self.context = nn.Parameter(torch.empty(attn_size).uniform_(-attn_size**-0.5, attn_size**-0.5))

    def forward(self, states: Tensor, mask: Tensor) -> PoolOut:
        scores = torch.tanh(self.proj(states)) @ self.context  # (B, S)
        log_alpha, _, row_valid = masked_log_alpha(scores, mask)
        weights = log_alpha.exp() * row_valid.unsqueeze(-1)  # (B, S)
        values = states.masked_fill(~mask.unsqueeze(-1), 0.0)
        return PoolOut(torch.einsum("bs,bsd->bd", weights.to(states.dtype), values), weights)


class ClsPooling(nn.Module):
    """The state at position 0, where the classifier put its learned [CLS] token (Devlin et al. 2019)."""

    def forward(self, states: Tensor, mask: Tensor) -> PoolOut:
        return PoolOut(states[:, 0], None)
