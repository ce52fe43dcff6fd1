"""Transformer stacks and the encoder-decoder network with the decoder ``step()`` protocol.

Vaswani et al. 2017, Figure 1. The network is assembled by ``lit_models.builders``; this module
only runs it. Decoder state (a pytree with batch on dim 0, reordered by beam search) is::

    {"mem_mask": (B, 1, 1, S) bool,
     "layers": [{"mem_k", "mem_v": (B, G, S, d_k), "self_k", "self_v": (B, G, t, d_k)}, ...]}

G is the number of key/value heads (h for MHA; fewer for grouped- or multi-query attention).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnlab_core.tokens import PAD
from lit_models.blocks.decoding import State
from lit_models.blocks.positions import PositionScheme
from lit_models.blocks.transformer import DecoderLayer, EncoderLayer


class TokenEmbedding(nn.Module):
    """Embedding lookup multiplied by sqrt(d_model) (Vaswani §3.4)."""

    def __init__(self, *, vocab_size: int, d_model: int) -> None:
        super().__init__()
        self.table = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        nn.init.normal_(self.table.weight, std=d_model**-0.5)
        self.scale = math.sqrt(d_model)

    def forward(self, ids: Tensor) -> Tensor:
        return self.table(ids) * self.scale  # (B, T, D)


def tie_none(src: TokenEmbedding, tgt: TokenEmbedding, out: nn.Linear) -> TokenEmbedding:
    """No tying: each embedding and the output projection keep their own matrix; returns ``src``."""
    return src


def tie_decoder(src: TokenEmbedding, tgt: TokenEmbedding, out: nn.Linear) -> TokenEmbedding:
    """Press & Wolf 2017: the output projection is the decoder input embedding; returns ``src``."""
    out.weight = tgt.table.weight
    return src


def tie_all(src: TokenEmbedding, tgt: TokenEmbedding, out: nn.Linear) -> TokenEmbedding:
    """Vaswani §3.4: one matrix for both embeddings and the output projection (shared vocabulary); returns
    ``tgt``, the embedding the source side uses too."""
    if src.table.num_embeddings != tgt.table.num_embeddings:
        raise ValueError(
            f"tying='all' needs one shared vocabulary, got src_vocab_size={src.table.num_embeddings} "
            f"and tgt_vocab_size={tgt.table.num_embeddings}"
        )
    tie_decoder(src, tgt, out)
    return tgt


class Encoder(nn.Module):
    """N encoder layers, plus a final LayerNorm for Pre-Norm (``final_norm`` is None for Post-Norm)."""

    def __init__(self, *, layers: list[EncoderLayer], final_norm: nn.LayerNorm | None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm

    def forward(self, x: Tensor, *, mask: Tensor, need_weights: bool = False) -> tuple[Tensor, list[Tensor | None]]:
        """x (B, S, D), mask (B, 1, 1, S) -> memory (B, S, D) and per-layer weights (B, H, S, S)."""
        maps = []
        for layer in self.layers:
            x, w = layer(x, mask=mask, need_weights=need_weights)
            maps.append(w)
        return (self.final_norm(x) if self.final_norm is not None else x), maps


class Decoder(nn.Module):
    """N decoder layers, plus a final LayerNorm for Pre-Norm."""

    def __init__(self, *, layers: list[DecoderLayer], final_norm: nn.LayerNorm | None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm

    def init_cache(self, memory: Tensor) -> list[dict[str, Tensor]]:
        """Per-layer caches with projected memory and empty self-attention keys/values."""
        caches = []
        for layer in self.layers:
            c = layer.memory_cache(memory)
            empty = c["mem_k"][:, :, :0]  # (B, G, 0, d_k)
            caches.append({**c, "self_k": empty, "self_v": empty})
        return caches

    def forward(
        self,
        y: Tensor,
        *,
        caches: list[dict[str, Tensor]],
        mem_mask: Tensor,
        incremental: bool,
        need_weights: bool = False,
    ) -> tuple[Tensor, list[dict[str, Tensor]], list[dict[str, Tensor | None]]]:
        """y (B, T, D) -> (B, T, D), updated caches, per-layer {'self', 'cross'} weights."""
        new_caches, maps = [], []
        for layer, cache in zip(self.layers, caches, strict=True):
            y, cache, w = layer(y, cache=cache, mem_mask=mem_mask, incremental=incremental,
                                need_weights=need_weights)
            new_caches.append(cache)
            maps.append(w)
        return (self.final_norm(y) if self.final_norm is not None else y), new_caches, maps


class EncoderDecoder(nn.Module):
    """The Transformer: embeddings + positions, encoder, decoder, output projection.

    ``src_positions``/``tgt_positions`` are the two sides' position schemes, registered here once;
    the builder hands the same objects to the encoder's and the decoder's self-attention.

    Implements the decoder protocol used by forcing policies and ``decoding.py``:
    ``encode(src) -> state``, ``step(prev, state) -> (logits, state)`` (KV cache), and
    ``teacher_forward(state, tgt_in) -> (logits, state)`` (one parallel causal pass).
    """

    def __init__(
        self,
        *,
        src_embed: TokenEmbedding,
        tgt_embed: TokenEmbedding,
        src_positions: PositionScheme,
        tgt_positions: PositionScheme,
        encoder: Encoder,
        decoder: Decoder,
        generator: nn.Linear,
        dropout: float,
    ) -> None:
        super().__init__()
        self.src_embed, self.tgt_embed = src_embed, tgt_embed
        self.src_positions, self.tgt_positions = src_positions, tgt_positions
        self.encoder, self.decoder, self.generator = encoder, decoder, generator
        self.embed_drop = nn.Dropout(dropout)

    def _src(self, src: Tensor) -> tuple[Tensor, Tensor]:
        mask = (src != PAD)[:, None, None, :]  # (B, 1, 1, S)
        return self.embed_drop(self.src_positions(self.src_embed(src))), mask

    def _tgt(self, ids: Tensor, offset: int) -> Tensor:
        return self.embed_drop(self.tgt_positions(self.tgt_embed(ids), offset))

    def encode(self, src: Tensor) -> State:
        """src (B, S) ids -> decoder state (see module docstring)."""
        x, mask = self._src(src)
        memory, _ = self.encoder(x, mask=mask)
        return {"mem_mask": mask, "layers": self.decoder.init_cache(memory)}

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State]:
        """prev_tokens (B,) -> next-token logits (B, V) and the state with the KV cache extended."""
        offset = state["layers"][0]["self_k"].size(2)
        y = self._tgt(prev_tokens[:, None], offset)  # (B, 1, D)
        y, caches, _ = self.decoder(y, caches=state["layers"], mem_mask=state["mem_mask"],
                                    incremental=True)
        return self.generator(y[:, 0]), {"mem_mask": state["mem_mask"], "layers": caches}

    def reorder_beams(self, state: State, index: Tensor) -> State:
        """Beam-search reordering (``decoding.BeamReorderable``): index (B*K,) -> reordered state.

        Only the self-attention caches move; ``mem_mask``/``mem_k``/``mem_v`` are identical
        within each example's beams, so they are kept as they are instead of copied every step.
        """
        layers = [{**c, "self_k": c["self_k"].index_select(0, index), "self_v": c["self_v"].index_select(0, index)}
                  for c in state["layers"]]
        return {"mem_mask": state["mem_mask"], "layers": layers}

    def teacher_forward(self, state: State, tgt_in: Tensor) -> tuple[Tensor, State]:
        """tgt_in (B, T) (BOS + gold prefix) -> logits (B, T, V), causal, in one pass.

        The state is returned unchanged (the KV cache is not filled by a full pass).
        """
        y = self._tgt(tgt_in, 0)
        y, _, _ = self.decoder(y, caches=state["layers"], mem_mask=state["mem_mask"],
                               incremental=False)
        return self.generator(y), state

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits (B, T, V) for src (B, S) and decoder input (B, T)."""
        return self.teacher_forward(self.encode(src), tgt_in)[0]

    @torch.no_grad()
    def attention_maps(self, src: Tensor, tgt_in: Tensor) -> dict[str, Tensor]:
        """Every attention map of one pass: name -> (B, H, T_q, T_k) weights.

        Names: ``enc_self/layer{i}``, ``dec_self/layer{i}``, ``cross/layer{i}`` (i from 1).
        """
        x, mask = self._src(src)
        memory, enc_maps = self.encoder(x, mask=mask, need_weights=True)
        caches = self.decoder.init_cache(memory)
        _, _, dec_maps = self.decoder(self._tgt(tgt_in, 0), caches=caches, mem_mask=mask,
                                      incremental=False, need_weights=True)
        maps = {f"enc_self/layer{i + 1}": w for i, w in enumerate(enc_maps)}
        for i, w in enumerate(dec_maps):
            maps[f"dec_self/layer{i + 1}"] = w["self"]
            maps[f"cross/layer{i + 1}"] = w["cross"]
        return maps
