"""Scaled dot-product and multi-head attention (Vaswani et al. 2017, §3.2).

Masks throughout attnlab are boolean with **True = may attend** (the SDPA convention;
``torch.nn.MultiheadAttention``'s ``key_padding_mask`` uses the opposite polarity). Where a position
scheme adds a score bias (ALiBi), mask and bias are merged into one float mask (-inf = may not
attend) so the fused SDPA kernel still runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_models.blocks.positions import PositionScheme


def _scores(q: Tensor, k: Tensor, *, mask: Tensor | None, scale: float, is_causal: bool) -> Tensor:
    """The masked logits q kᵀ · scale in float32 (autocast off): (B, H, T, S), -inf where a key may not be attended.

    q (B, H, T, d_k), k (B, H, S, d_k); ``mask`` as in :func:`attention_weights`; ``is_causal`` adds the causal
    mask (:func:`causal_mask`, queries are the last T positions).
    """
    if is_causal:
        mask = causal_mask(q.size(-2), k.size(-2), device=q.device) if mask is None else _and_causal(mask, q, k)
    with torch.autocast(device_type=q.device.type, enabled=False):
        scores = torch.matmul(q.float(), k.float().transpose(-2, -1)) * scale  # (B, H, T, S)
        if mask is not None and mask.dtype == torch.bool:
            return scores.masked_fill(~mask, float("-inf"))
        return scores if mask is None else scores + mask.float()


def attention_weights(q: Tensor, k: Tensor, *, mask: Tensor | None, scale: float, is_causal: bool = False) -> Tensor:
    """softmax(q kᵀ · scale) with masking, in float32.

    Args:
        q: (B, H, T, d_k) queries.
        k: (B, H, S, d_k) keys.
        mask: boolean, broadcastable to (B, H, T, S), True = may attend; or a float mask added to
            the scaled logits (-inf = may not attend).
        scale: multiplier of the logits (Vaswani eq. 1: 1/sqrt(d_k); ``lit_models.registries.ATTN_SCALES``).
        is_causal: also mask the future keys (:func:`causal_mask`).

    Returns:
        (B, H, T, S) float32 weights; rows sum to 1, masked entries are exactly 0 and a row with
        no allowed key is all zeros (not NaN). Autocast is switched off here, so the logits and
        the softmax stay float32 under ``bf16-mixed`` / ``16-mixed`` too.
    """
    scores = _scores(q, k, mask=mask, scale=scale, is_causal=is_causal)
    with torch.autocast(device_type=q.device.type, enabled=False):
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

    The normal path is ``F.scaled_dot_product_attention`` (fused kernels, linear memory; grouped keys and
    values through its ``enable_gqa``, without copying them to H heads); ``need_weights=True`` takes an
    explicit path that also returns the weights, for figures and probes (it repeats grouped keys and values,
    :func:`repeat_kv`). Both give the same output in eval mode.

    Args:
        q: (B, H, T, d_k); k: (B, G, S, d_k); v: (B, G, S, d_v), G dividing H (G = H: multi-head attention).
        mask: boolean, broadcastable to (B, H, T, S), True = may attend; a float mask added to the
            scaled logits (see ``with_bias``); or None.
        is_causal: apply a causal mask too (through the fused kernel's flag when ``mask`` is None).

    Returns:
        out (B, H, T, d_v) and weights (B, H, T, S) or None.
    """
    if need_weights:
        heads = q.size(1)
        k, v = repeat_kv(k, heads), repeat_kv(v, heads)  # (B, H, S, d)
        weights = attention_weights(q, k, mask=mask, scale=scale, is_causal=is_causal)
        dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
        return torch.matmul(dropped.to(v.dtype), v), weights
    if is_causal and mask is not None:
        mask, is_causal = _and_causal(mask, q, k), False
    if mask is not None and mask.dtype != torch.bool and mask.dtype != q.dtype:
        mask = mask.to(q.dtype)  # SDPA wants a float mask in the query's dtype (bf16 under autocast)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale,
                                         is_causal=is_causal, enable_gqa=k.size(1) != q.size(1))
    return out, None


def with_bias(mask: Tensor | None, bias: Tensor | None) -> Tensor | None:
    """Merge a score bias (H, T, S) into a boolean mask: a float mask, bias where attending is allowed
    and -inf elsewhere, broadcast to (B, H, T, S). Without a bias the mask passes through unchanged
    (the fast path of every scheme that does not bias scores)."""
    if bias is None or mask is None:
        return mask if bias is None else bias
    return bias.masked_fill(~mask, float("-inf"))


def _and_causal(mask: Tensor, q: Tensor, k: Tensor) -> Tensor:
    """A boolean mask restricted to causal positions, or a float mask with -inf at future keys."""
    causal = causal_mask(q.size(-2), k.size(-2), device=mask.device)
    return mask & causal if mask.dtype == torch.bool else mask.masked_fill(~causal, float("-inf"))


def causal_mask(t: int, s: int, *, device: torch.device | None = None) -> Tensor:
    """(T, S) boolean mask, True where key j <= query i + (S - T) (queries are the last T positions)."""
    return torch.ones(t, s, dtype=torch.bool, device=device).tril(diagonal=s - t)


def repeat_kv(x: Tensor, heads: int) -> Tensor:
    """Grouped-query attention's sharing (Ainslie et al. 2023, §2.2): (B, G, S, d) key or value heads ->
    (B, heads, S, d), query head j reading group j // (heads / G). G = heads returns x itself (MHA)."""
    groups = x.size(1)
    return x if groups == heads else x.repeat_interleave(heads // groups, dim=1)


def logit_max(q: Tensor, k: Tensor, *, mask: Tensor | None, scale: float, is_causal: bool) -> Tensor:
    """The largest logit q·k·scale (plus any score bias) over the keys each query may attend: a 0-d float32
    tensor, left on the device (no host sync); -inf when no key is allowed. q (B, H, T, d), k (B, H, S, d)."""
    return _scores(q, k, mask=mask, scale=scale, is_causal=is_causal).amax()


@dataclass(frozen=True, kw_only=True)
class AttentionOptions:
    """What one multi-head attention takes, resolved (the builder reads each from the model's spec field or
    derived value of the same name, ``builders.layer_options``).

    Attributes:
        heads: number of heads h.
        d_head: width d_k of each head; the model width is D = h·d_k (no check needed: the spec validated it).
        scale: the multiplier of the logits q·k (Vaswani eq. 1: 1/sqrt(d_k)), resolved by the builder.
        attn_dropout: dropout on the attention weights.
        kv_heads: G key/value heads, dividing h (the spec checks and resolves it); G = h is multi-head attention.
        qk_norm: LayerNorm on each head's queries and keys before the score.
    """

    heads: int
    d_head: int
    scale: float
    attn_dropout: float
    kv_heads: int
    qk_norm: bool = False


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    Vaswani et al. 2017 §3.2.2 with d_k = d_v = d_model / h, given here as h and d_k (so D = h·d_k
    needs no check: the model's spec validates the split once). The three input projections are
    one fused matrix, laid out [W^Q; W^K; W^V] like ``torch.nn.MultiheadAttention.in_proj_weight``:
    self-attention projects Q, K, V with one matmul, cross-attention projects Q from the decoder and
    K, V from the memory with its row blocks.

    Grouped-query attention (Ainslie et al. 2023; multi-query attention, Shazeer 2019, is G = 1):
    ``kv_heads`` = G key/value heads, each shared by h/G query heads, so W^K and W^V have G·d_k rows
    and the matrix is ((h + 2G)·d_k, D). Projected (and cached) keys and values keep G heads, and so does the
    fused attention; they are repeated to h heads only where the weights are materialised. G = h is
    Vaswani's attention, parameter for parameter (4·D² + 4·D whatever the number of heads).

    QK-norm (Dehghani et al. 2023, §3.1.1 "QK normalization"; Wortsman et al. 2023, §3.1): a LayerNorm
    over each head's d_k applied to the projected queries and keys before the score (before RoPE's
    rotation), its gain and bias shared by the heads (one LayerNorm for q, one for k). Cached keys are
    stored normalised, so incremental decoding still equals a full pass.

    Args:
        options: h, d_k, the logit scale, the attention dropout, G and QK-norm (:class:`AttentionOptions`).
        positions: the position scheme of the sequence this module attends over (self-attention):
            its ``rotate`` hook transforms q and k, its ``score_bias`` hook biases the scores. None
            for cross-attention, whose queries and keys index different sequences. The scheme is
            held by reference, not registered here: the network that owns it registers it.

    ``logit_tap``: when a probe sets it to a callable, :meth:`attend` passes it :func:`logit_max` of
    every call (a device tensor); None (the default) costs nothing.
    """

    def __init__(self, options: AttentionOptions, *, positions: PositionScheme | None = None) -> None:
        super().__init__()
        self.heads, self.d_k, self.scale = options.heads, options.d_head, options.scale
        self.kv_heads = options.kv_heads
        d_head, d_model = options.d_head, options.heads * options.d_head
        self.dropout = options.attn_dropout
        self.in_proj = nn.Linear(d_model, d_model + 2 * self.kv_heads * d_head)
        self.out_proj = nn.Linear(d_model, d_model)
        self.q_norm = nn.LayerNorm(d_head) if options.qk_norm else nn.Identity()
        self.k_norm = nn.LayerNorm(d_head) if options.qk_norm else nn.Identity()
        object.__setattr__(self, "positions", positions)  # shared, owned (registered) by the network
        self.logit_tap: Callable[[Tensor], None] | None = None

    def _split(self, x: Tensor) -> Tensor:
        b, t, width = x.shape
        return x.view(b, t, width // self.d_k, self.d_k).transpose(1, 2)  # (B, heads or G, T, d_k)

    def project_qkv(self, x: Tensor, offset: int = 0) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention projections: x (B, T, D) at positions offset.. -> q (B, H, T, d_k), k, v (B, G, T, d_k).

        q and k pass through QK-norm, then the scheme's ``rotate`` hook (RoPE), so cached keys are stored
        normalised and rotated.
        """
        d, kv = x.size(-1), self.kv_heads * self.d_k
        q, k, v = self.in_proj(x).split((d, kv, kv), dim=-1)
        q, k, v = self.q_norm(self._split(q)), self.k_norm(self._split(k)), self._split(v)
        if self.positions is not None:
            q, k = self.positions.rotate(q, offset), self.positions.rotate(k, offset)
        return q, k, v

    def project_q(self, x: Tensor) -> Tensor:
        """Query projection only: (B, T, D) -> (B, H, T, d_k)."""
        d = x.size(-1)
        return self.q_norm(self._split(F.linear(x, self.in_proj.weight[:d], self.in_proj.bias[:d])))

    def project_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Key/value projections of a memory: (B, S, D) -> k, v each (B, G, S, d_k)."""
        d = memory.size(-1)
        k, v = F.linear(memory, self.in_proj.weight[d:], self.in_proj.bias[d:]).chunk(2, dim=-1)
        return self.k_norm(self._split(k)), self._split(v)

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        mask: Tensor | None,
        need_weights: bool = False,
        is_causal: bool = False,
        offset: int = 0,
    ) -> tuple[Tensor, Tensor | None]:
        """Attention over projected heads, then W^O: returns (B, T, D) and weights (B, H, T, S) or None.

        q (B, H, T, d_k); k, v (B, G, S, d_k): each group serves H/G query heads (SDPA's ``enable_gqa``; repeated
        to H heads only for the weights and the logit tap, :func:`repeat_kv`).
        ``offset`` is the position of the first query (keys are at 0..S-1), for the scheme's score bias.
        """
        p = self.dropout if self.training else 0.0
        if self.positions is not None:
            t, s = q.size(-2), k.size(-2)
            mask = with_bias(mask, self.positions.score_bias(t=t, s=s, offset=offset, device=q.device))
        if self.logit_tap is not None:
            k_h = repeat_kv(k.detach(), self.heads)  # (B, H, S, d_k)
            self.logit_tap(logit_max(q.detach(), k_h, mask=mask, scale=self.scale, is_causal=is_causal))
        out, weights = scaled_dot_product(
            q, k, v, mask=mask, scale=self.scale, dropout_p=p, need_weights=need_weights, is_causal=is_causal
        )
        b, h, t, d_k = out.shape
        out = out.transpose(1, 2).reshape(b, t, h * d_k)  # (B, T, D)
        return self.out_proj(out), weights
