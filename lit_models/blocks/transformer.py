"""Transformer encoder/decoder layers and stacks with Post- or Pre-Norm residuals and a KV cache.

Vaswani et al. 2017, §3.1-3.3. Post-Norm is the paper's LN(x + Dropout(Sublayer(x)));
Pre-Norm (Xiong et al. 2020; Wang et al. 2019) is x + Dropout(Sublayer(LN(x))) and adds a
final LayerNorm after the stack (a deviation from the paper that Pre-Norm requires).

Layers take resolved numbers (:class:`LayerOptions`): h heads of width d_head (D = h·d_head), the
logit ``scale`` and ``pre_norm`` (the builder derives them from the model's ``TransformerSpec``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_models.blocks.attention import AttentionOptions, MultiHeadAttention, causal_mask
from lit_models.blocks.positions import PositionScheme

Sublayer = Callable[[Tensor], Tensor]


def _post(x: Tensor, fn: Sublayer, norm: nn.LayerNorm, drop: nn.Dropout) -> Tensor:
    return norm(x + drop(fn(x)))


def _pre(x: Tensor, fn: Sublayer, norm: nn.LayerNorm, drop: nn.Dropout) -> Tensor:
    return x + drop(fn(norm(x)))


class Residual(nn.Module):
    """A residual connection around a sublayer, with dropout and its LayerNorm after the sum (Post-Norm,
    Vaswani §5.4: LN(x + Dropout(F(x)))) or on the sublayer's input (``pre_norm``: x + Dropout(F(LN(x))))."""

    def __init__(self, *, d_model: int, pre_norm: bool, dropout: float) -> None:
        super().__init__()
        self.combine = _pre if pre_norm else _post
        self.norm = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, fn: Sublayer) -> Tensor:
        return self.combine(x, fn, self.norm, self.drop)


@dataclass(frozen=True, kw_only=True)
class LayerOptions(AttentionOptions):
    """What every encoder, decoder and causal layer takes, resolved (Vaswani §3.1-3.3, §5.4): its attentions'
    options (:class:`~lit_models.blocks.attention.AttentionOptions`), then

    Attributes:
        d_ff: inner width of the FFN (eq. 2).
        dropout: on each sublayer's output (P_drop).
        pre_norm: LayerNorm on each sublayer's input (Pre-Norm) instead of after the residual sum.

    ``d_ff`` is the width the layer's FFN gets, resolved: the builder widens the spec's ``d_ff`` for
    ``ffn_absorbs_kv`` (``TransformerSpec.ffn_width``), per layer kind (one or two attention modules).
    """

    d_ff: int
    dropout: float
    pre_norm: bool

    @property
    def d_model(self) -> int:
        return self.heads * self.d_head

    def attention(self, positions: PositionScheme | None = None) -> MultiHeadAttention:
        return MultiHeadAttention(self, positions=positions)

    def feed_forward(self) -> FeedForward:
        return FeedForward(d_model=self.d_model, d_ff=self.d_ff)

    def residual(self) -> Residual:
        return Residual(d_model=self.d_model, pre_norm=self.pre_norm, dropout=self.dropout)


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 (Vaswani eq. 2), d_model -> d_ff -> d_model."""

    def __init__(self, *, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.w1, self.w2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(F.relu(self.w1(x)))


class EncoderLayer(nn.Module):
    """Self-attention then FFN, each inside a ``Residual`` (Vaswani §3.1), built from :class:`LayerOptions`.

    ``positions`` is the source side's scheme, injected into the self-attention (None = no hook).
    """

    def __init__(self, options: LayerOptions, *, positions: PositionScheme | None = None) -> None:
        super().__init__()
        self.self_attn = options.attention(positions)
        self.ffn = options.feed_forward()
        self.res_attn, self.res_ffn = options.residual(), options.residual()

    def forward(self, x: Tensor, *, mask: Tensor, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """x (B, S, D), mask (B, 1, 1, S) True = real token -> (B, S, D), weights (B, H, S, S) or None."""
        weights: list[Tensor | None] = [None]

        def attn(h: Tensor) -> Tensor:
            q, k, v = self.self_attn.project_qkv(h)
            out, weights[0] = self.self_attn.attend(q, k, v, mask=mask, need_weights=need_weights)
            return out

        x = self.res_attn(x, attn)
        return self.res_ffn(x, self.ffn), weights[0]


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention (Q from the decoder, K/V from the memory), FFN.

    The layer keeps no state: ``cache`` is a dict owned by the caller with keys ``self_k``,
    ``self_v`` (B, G, t, d_k) — the keys/values of the tokens decoded so far — and ``mem_k``,
    ``mem_v`` (B, G, S, d_k), the memory's projections, computed once per source (G = the key/value
    heads: h for MHA, fewer for GQA/MQA, so the cache shrinks by h/G).
    ``positions`` is the target side's scheme, injected into the masked self-attention only.
    """

    def __init__(self, options: LayerOptions, *, positions: PositionScheme | None = None) -> None:
        super().__init__()
        self.self_attn = options.attention(positions)
        self.cross_attn = options.attention()
        self.ffn = options.feed_forward()
        self.res_self, self.res_cross, self.res_ffn = options.residual(), options.residual(), options.residual()

    def memory_cache(self, memory: Tensor) -> dict[str, Tensor]:
        """Project the encoder memory (B, S, D) once: {'mem_k', 'mem_v'} each (B, G, S, d_k)."""
        k, v = self.cross_attn.project_kv(memory)
        return {"mem_k": k, "mem_v": v}

    def forward(
        self,
        x: Tensor,
        *,
        cache: dict[str, Tensor],
        mem_mask: Tensor,
        incremental: bool,
        need_weights: bool = False,
    ) -> tuple[Tensor, dict[str, Tensor], dict[str, Tensor | None]]:
        """Run the layer on x (B, T, D).

        Args:
            cache: see the class docstring. With ``incremental`` the new keys/values are appended
                to ``self_k``/``self_v`` and x holds only the newest token(s); otherwise x is the
                whole target prefix and a causal mask is applied.
            mem_mask: (B, 1, 1, S) True = real source token.

        Returns:
            (B, T, D), the updated cache, and weights {'self': (B,H,T,t), 'cross': (B,H,T,S)} or Nones.
        """
        weights: dict[str, Tensor | None] = {"self": None, "cross": None}
        cache = dict(cache)

        def self_attn(h: Tensor) -> Tensor:
            offset = cache["self_k"].size(2) if incremental else 0
            q, k, v = self.self_attn.project_qkv(h, offset)
            if incremental:
                k = cache["self_k"] = _append(cache["self_k"], k)
                v = cache["self_v"] = _append(cache["self_v"], v)
            # A full pass uses the fused causal kernel; several new tokens after a cache need a
            # bottom-right aligned mask (SDPA's is_causal aligns top-left); one new token needs none.
            mask = causal_mask(q.size(2), k.size(2), device=q.device) if incremental and q.size(2) > 1 else None
            out, weights["self"] = self.self_attn.attend(
                q, k, v, mask=mask, need_weights=need_weights, is_causal=not incremental, offset=offset
            )
            return out

        def cross_attn(h: Tensor) -> Tensor:
            q = self.cross_attn.project_q(h)
            out, weights["cross"] = self.cross_attn.attend(
                q, cache["mem_k"], cache["mem_v"], mask=mem_mask, need_weights=need_weights
            )
            return out

        x = self.res_self(x, self_attn)
        x = self.res_cross(x, cross_attn)
        return self.res_ffn(x, self.ffn), cache, weights


def _append(past: Tensor, new: Tensor) -> Tensor:
    """Concatenate along time: (B, G, t, d) + (B, G, n, d) -> (B, G, t + n, d)."""
    return torch.cat((past, new), dim=2)
