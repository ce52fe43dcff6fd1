"""Decoder-only (GPT-style) Transformer: a causal self-attention stack with a KV cache.

Radford et al. 2018 (GPT, §3.1): the Transformer decoder without cross-attention, trained as a
language model L(U) = sum_i log P(u_i | u_<i). The layers are the Vaswani et al. 2017 sublayers
(``MultiHeadAttention``, ``FeedForward`` inside ``Residual`` with Post- or Pre-Norm); the position
scheme is built by the builder and held by every self-attention (embedding, q/k and score-bias hooks).

Prompt -> answer framing (the decoder protocol of ``decoding.py`` / ``forcing.py``)::

    sequence = prompt · BOS · answer · EOS        (BOS is the separator; loss on answer · EOS only)

``encode(prompt)`` runs the prompt once and keeps its keys/values (prefill); ``step`` and
``teacher_forward`` continue from there. Prompts of different lengths are **left-padded** inside
the state, so every row's answer starts at the same cache slot: PAD keys are masked out, and each
row's absolute positions count its own real tokens (0 for its first prompt token), so a row's
output does not depend on how much padding its batch needed. RoPE and ALiBi see only slot
differences, which left padding leaves intact; the additive schemes (sinusoidal, learned) receive
per-row position ids. Decoder state (a pytree with batch on dim 0, reordered by beam search)::

    {"key_mask": (B, t) bool, True = real token,
     "pos": (B,) long, position id of the next token,
     "layers": [{"k", "v": (B, G, t, d_k)}, ...]}     (G = key/value heads: h, or fewer for GQA/MQA)
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnlab_core.tokens import PAD
from lit_models.blocks.attention import causal_mask
from lit_models.blocks.decoding import State
from lit_models.blocks.encoder_decoder import TokenEmbedding
from lit_models.blocks.positions import PositionScheme
from lit_models.blocks.transformer import EncoderLayer


class CausalLayer(EncoderLayer):
    """Masked self-attention then FFN, each inside a ``Residual`` (a decoder layer without cross-attention).

    The sublayers are ``EncoderLayer``'s (same parameters, same names); only the attention differs: causal,
    over a key/value cache. The layer keeps no state: ``cache`` ({'k', 'v'}: (B, G, t, d_k), rotated keys)
    is owned by the caller.
    """

    def forward(
        self, x: Tensor, *, cache: dict[str, Tensor], mask: Tensor | None, need_weights: bool = False,
    ) -> tuple[Tensor, dict[str, Tensor], Tensor | None]:
        """x (B, T, D): the T newest tokens, at cache slots t..t+T-1 where t = cache length.

        Args:
            mask: (B, 1, T, t + T) bool, True = may attend (causal and real keys), or None for a
                full pass without padding (the fused causal kernel).

        Returns:
            (B, T, D), the cache extended by T keys/values, weights (B, H, T, t + T) or None.
        """
        weights: list[Tensor | None] = [None]
        new_cache: dict[str, Tensor] = {}

        def attn(h: Tensor) -> Tensor:
            offset = cache["k"].size(2)
            q, k, v = self.self_attn.project_qkv(h, offset)
            if offset:  # (B, G, t + T, d_k); an empty cache is not concatenated (it may differ in dtype)
                k, v = torch.cat((cache["k"], k), dim=2), torch.cat((cache["v"], v), dim=2)
            new_cache["k"], new_cache["v"] = k, v
            out, weights[0] = self.self_attn.attend(q, k, v, mask=mask, need_weights=need_weights,
                                                    is_causal=mask is None, offset=offset)
            return out

        x = self.res_attn(x, attn)
        return self.res_ffn(x, self.ffn), new_cache, weights[0]


def left_pad(ids: Tensor) -> Tensor:
    """Move each row's PAD to the front: (B, S) right-padded -> (B, S) left-padded (order kept)."""
    real = ids != PAD
    order = torch.argsort(real.long(), dim=1, stable=True)  # PAD slots (0) first, then real ones in order
    return ids.gather(1, order)


def attention_mask(key_mask: Tensor, t_new: int) -> Tensor:
    """(B, 1, T, S) bool: causal over the last T of S slots, real keys only, and always the query's own slot
    (so a PAD query row is never empty: no NaN enters the cache). key_mask: (B, S) True = real."""
    s = key_mask.size(1)
    causal = causal_mask(t_new, s, device=key_mask.device)  # (T, S)
    slots = torch.arange(s, device=key_mask.device)
    own = slots[None, :] == slots[s - t_new:, None]  # (T, S): the query's own slot
    return (causal & (key_mask[:, None, :] | own))[:, None]  # (B, 1, T, S)


class CausalTransformer(nn.Module):
    """Token embedding (× sqrt(d_model)), one position scheme, N causal layers, final norm (Pre-Norm), output.

    Implements the decoder protocol used by ``forcing.py`` and ``decoding.py``:
    ``encode(prompt) -> state`` (prefill), ``step(prev, state) -> (logits, state)`` (KV cache),
    ``teacher_forward(state, tgt_in) -> (logits, state)``; and ``lm_logits(ids)`` for plain text.
    """

    def __init__(
        self, *, embed: TokenEmbedding, positions: PositionScheme, layers: list[CausalLayer],
        final_norm: nn.LayerNorm | None, generator: nn.Linear, dropout: float,
    ) -> None:
        super().__init__()
        self.embed, self.positions = embed, positions
        self.layers = nn.ModuleList(layers)
        self.final_norm, self.generator = final_norm, generator
        self.embed_drop = nn.Dropout(dropout)

    # ----------------------------------------------------------------- internals
    def _embed(self, ids: Tensor, pos: Tensor, slots: int) -> Tensor:
        """ids, pos (B, T) -> (B, T, D). The embedding hook is additive (positions.py), so it is
        evaluated once on zeros and gathered at each row's own position ids. A row counts only its own tokens,
        so its positions stay below ``slots`` (cached plus new slots, a shape: no read from the device); only a
        table shorter than that reads the largest position, so a padded batch whose rows fit still runs."""
        x = self.embed(ids)  # (B, T, D)
        limit = self.positions.max_len
        n = max(slots, 1) if limit is None or slots <= limit else int(pos.max()) + 1
        table = self.positions(x.new_zeros(1, n, x.size(-1)), 0)[0]  # (n, D)
        return self.embed_drop(x + table[pos])

    def _run(
        self, ids: Tensor, pos: Tensor, key_mask: Tensor, caches: list[dict[str, Tensor]], *, padded: bool,
        need_weights: bool = False,
    ) -> tuple[Tensor, list[dict[str, Tensor]], list[Tensor | None]]:
        """ids, pos (B, T) after the cached slots; key_mask (B, t + T) -> hidden (B, T, D), caches, maps."""
        x = self._embed(ids, pos, caches[0]["k"].size(2) + ids.size(1))
        mask = attention_mask(key_mask, ids.size(1)) if padded or caches[0]["k"].size(2) else None
        new, maps = [], []
        for layer, cache in zip(self.layers, caches, strict=True):
            x, cache, w = layer(x, cache=cache, mask=mask, need_weights=need_weights)
            new.append(cache)
            maps.append(w)
        return (self.final_norm(x) if self.final_norm is not None else x), new, maps

    @staticmethod
    def cache_bytes_per_token(state: State) -> int:
        """Bytes the KV cache of ``state`` grows by per token and sequence: keys and values of every layer, G heads
        of d_k (G = kv_heads; Shazeer 2019 and Ainslie et al. 2023 shrink exactly this), in the cache's own dtype
        (bf16 under bf16 autocast, whatever the weights' dtype)."""
        return sum(c[n].size(1) * c[n].size(3) * c[n].element_size() for c in state["layers"] for n in ("k", "v"))

    def _empty(self, b: int, device: torch.device) -> list[dict[str, Tensor]]:
        attn = self.layers[0].self_attn
        empty = torch.zeros(b, attn.kv_heads, 0, attn.d_k, device=device, dtype=self.embed.table.weight.dtype)
        return [{"k": empty, "v": empty} for _ in self.layers]

    def _prefill(self, prompt: Tensor, need_weights: bool = False) -> tuple[State, list[Tensor | None]]:
        ids = left_pad(prompt)
        real = ids != PAD  # (B, S)
        pos = (real.long().cumsum(1) - 1).clamp_min(0)  # each row counts its own tokens from 0
        _, caches, maps = self._run(ids, pos, real, self._empty(ids.size(0), ids.device), padded=True,
                                    need_weights=need_weights)
        return {"key_mask": real, "pos": real.sum(1), "layers": caches}, maps

    def _continue(
        self, state: State, ids: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, State, list[Tensor | None]]:
        """Run ids (B, T) after the state's cache; right-padding of ids needs no mask (causal)."""
        t = ids.size(1)
        pos = state["pos"][:, None] + torch.arange(t, device=ids.device)  # (B, T)
        pos = pos.masked_fill(ids == PAD, 0)
        key_mask = torch.cat((state["key_mask"], torch.ones_like(ids, dtype=torch.bool)), dim=1)
        h, caches, maps = self._run(ids, pos, key_mask, state["layers"], padded=False, need_weights=need_weights)
        new = {"key_mask": key_mask, "pos": state["pos"] + t, "layers": caches}
        return self.generator(h), new, maps

    # ------------------------------------------------------------------ protocol
    def encode(self, prompt: Tensor) -> State:
        """prompt (B, S) right-padded ids -> state with the prompt's keys/values cached."""
        return self._prefill(prompt)[0]

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State]:
        """prev_tokens (B,) -> next-token logits (B, V) and the state with the KV cache extended."""
        logits, new, _ = self._continue(state, prev_tokens[:, None])
        return logits[:, 0], new

    def teacher_forward(self, state: State, tgt_in: Tensor) -> tuple[Tensor, State]:
        """tgt_in (B, T) (BOS + gold answer prefix, right-padded) -> logits (B, T, V) in one causal pass.

        Returns the state after tgt_in (its cache extended), like the recurrent decoders' final state.
        """
        logits, new, _ = self._continue(state, tgt_in)
        return logits, new

    def forward(self, prompt: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced answer logits (B, T, V) for prompt (B, S) and answer input (B, T)."""
        return self.teacher_forward(self.encode(prompt), tgt_in)[0]

    def lm_logits(self, ids: Tensor) -> Tensor:
        """Plain causal language model: ids (B, T) without padding -> next-token logits (B, T, V)."""
        b, t = ids.shape
        pos = torch.arange(t, device=ids.device).expand(b, t)
        key_mask = torch.ones_like(ids, dtype=torch.bool)
        h, _, _ = self._run(ids, pos, key_mask, self._empty(b, ids.device), padded=False)
        return self.generator(h)

    @torch.no_grad()
    def sequence_attention(self, prompt: Tensor, tgt_in: Tensor) -> dict[str, Tensor]:
        """Per layer, the attention of every slot of left-padded ``prompt · tgt_in``: ``self/layer{i}`` ->
        (B, H, S + T, S + T); rows are queries (the prompt's rows, then the answer's)."""
        state, pre = self._prefill(prompt, need_weights=True)
        _, _, post = self._continue(state, tgt_in, need_weights=True)
        s = prompt.size(1)
        maps = {}
        for i, (a, b) in enumerate(zip(pre, post, strict=True)):
            top = nn.functional.pad(a, (0, b.size(-1) - s))  # prompt rows see no answer keys
            maps[f"self/layer{i + 1}"] = torch.cat((top, b), dim=2)
        return maps

    @torch.no_grad()
    def attention_maps(self, prompt: Tensor, tgt_in: Tensor) -> dict[str, Tensor]:
        """The answer's rows of :meth:`sequence_attention`: ``self/layer{i}`` -> (B, H, T, S + T)."""
        s = prompt.size(1)
        return {k: w[:, :, s:] for k, w in self.sequence_attention(prompt, tgt_in).items()}
