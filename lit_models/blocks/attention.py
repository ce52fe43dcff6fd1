"""Scaled dot-product and multi-head attention (Vaswani et al. 2017, §3.2).

Masks throughout attnlab are boolean with **True = may attend** (the SDPA convention;
``torch.nn.MultiheadAttention``'s ``key_padding_mask`` uses the opposite polarity).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_models.axes import AttnScale

ATTN_SCALES: dict[AttnScale, Callable[[int], float]] = {
    "sqrt_dk": lambda d_k: d_k**-0.5,  # Vaswani eq. 1
    "none": lambda d_k: 1.0,  # plain dot product: logits grow with d_k, softmax saturates
    "dk": lambda d_k: 1.0 / d_k,  # over-scaled: logits shrink with d_k, attention goes uniform
}


def attention_weights(q: Tensor, k: Tensor, *, mask: Tensor | None, scale: float) -> Tensor:
    """softmax(q kᵀ · scale) with masking, in float32.

    Args:
        q: (B, H, T, d_k) queries.
        k: (B, H, S, d_k) keys.
        mask: boolean, broadcastable to (B, H, T, S); True = may attend.
        scale: multiplier of the logits (see ``ATTN_SCALES``).

    Returns:
        (B, H, T, S) float32 weights; rows sum to 1, masked entries are exactly 0 and a row with
        no allowed key is all zeros (not NaN). Autocast is switched off here, so the logits and
        the softmax stay float32 under ``bf16-mixed`` / ``16-mixed`` too.
    """
    with torch.autocast(device_type=q.device.type, enabled=False):
        scores = torch.matmul(q.float(), k.float().transpose(-2, -1)) * scale  # (B, H, T, S)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return torch.softmax(scores, dim=-1).nan_to_num(0.0)


def scaled_dot_product(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    mask: Tensor | None,
    scale: float,
    dropout_p: float,
    need_weights: bool,
    is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Attention(Q, K, V) = softmax(Q Kᵀ · scale) V  (Vaswani eq. 1 with a configurable scale).

    The normal path is ``F.scaled_dot_product_attention`` (fused kernels, linear memory);
    ``need_weights=True`` takes an explicit path that also returns the weights, for figures
    and probes. Both give the same output in eval mode.

    Args:
        q: (B, H, T, d_k); k: (B, H, S, d_k); v: (B, H, S, d_v).
        mask: boolean, broadcastable to (B, H, T, S), True = may attend; or None.
        is_causal: apply a causal mask (ignored if ``mask`` is given; build it into the mask).

    Returns:
        out (B, H, T, d_v) and weights (B, H, T, S) or None.
    """
    if not need_weights:
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale, is_causal=is_causal and mask is None
        )
        return out, None
    if is_causal and mask is None:
        mask = causal_mask(q.size(-2), k.size(-2), device=q.device)
    weights = attention_weights(q, k, mask=mask, scale=scale)
    dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    return torch.matmul(dropped.to(v.dtype), v), weights


def causal_mask(t: int, s: int, *, device: torch.device | None = None) -> Tensor:
    """(T, S) boolean mask, True where key j <= query i + (S - T) (queries are the last T positions)."""
    return torch.ones(t, s, dtype=torch.bool, device=device).tril(diagonal=s - t)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    Vaswani et al. 2017 §3.2.2 with d_k = d_v = d_model / h. The three input projections are
    one fused (3·d_model, d_model) matrix, laid out [W^Q; W^K; W^V] like
    ``torch.nn.MultiheadAttention.in_proj_weight``: self-attention projects Q, K, V with one
    matmul, cross-attention projects Q from the decoder and K, V from the memory with its
    row blocks. The parameter count is 4·d_model² + 4·d_model whatever the number of heads.

    Args:
        d_model: model width D.
        heads: number of heads h (must divide D).
        attn_scale: logit scaling arm (``ATTN_SCALES``).
        dropout: dropout on the attention weights.
    """

    def __init__(self, *, d_model: int, heads: int, attn_scale: AttnScale, dropout: float) -> None:
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model={d_model} is not divisible by heads={heads}")
        self.heads, self.d_k = heads, d_model // heads
        self.scale = ATTN_SCALES[attn_scale](self.d_k)
        self.dropout = dropout
        self.in_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def _split(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.d_k).transpose(1, 2)  # (B, H, T, d_k)

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention projections: x (B, T, D) -> q, k, v each (B, H, T, d_k)."""
        q, k, v = self.in_proj(x).chunk(3, dim=-1)
        return self._split(q), self._split(k), self._split(v)

    def project_q(self, x: Tensor) -> Tensor:
        """Query projection only: (B, T, D) -> (B, H, T, d_k)."""
        d = x.size(-1)
        return self._split(F.linear(x, self.in_proj.weight[:d], self.in_proj.bias[:d]))

    def project_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Key/value projections of a memory: (B, S, D) -> k, v each (B, H, S, d_k)."""
        d = memory.size(-1)
        k, v = F.linear(memory, self.in_proj.weight[d:], self.in_proj.bias[d:]).chunk(2, dim=-1)
        return self._split(k), self._split(v)

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        mask: Tensor | None,
        need_weights: bool = False,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attention over projected heads, then W^O: returns (B, T, D) and weights (B, H, T, S) or None."""
        p = self.dropout if self.training else 0.0
        out, weights = scaled_dot_product(
            q, k, v, mask=mask, scale=self.scale, dropout_p=p, need_weights=need_weights, is_causal=is_causal
        )
        b, h, t, d_k = out.shape
        out = out.transpose(1, 2).reshape(b, t, h * d_k)  # (B, T, D)
        return self.out_proj(out), weights
