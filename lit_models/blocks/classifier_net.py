"""Text-classifier networks: token embeddings -> encoder states -> pooling -> linear head.

Plain torch; wired by ``lit_models.builders.build_classifier``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from attnlab_core.tokens import PAD
from lit_models.blocks.encoder_decoder import Encoder
from lit_models.blocks.positions import PositionScheme
from lit_models.blocks.recurrent import RecurrentEncoder


class ClassifierOut(NamedTuple):
    """logits (B, C); weights (B, S) per input token (pooling weights, CLS removed) or None."""

    logits: Tensor
    weights: Tensor | None


class RecurrentStates(nn.Module):
    """Embedded tokens (B, S, E) -> recurrent outputs (B, S, dirs·H), zero at padding."""

    def __init__(self, *, encoder: RecurrentEncoder, dropout: float) -> None:
        super().__init__()
        self.encoder, self.drop = encoder, nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        return self.encoder(self.drop(x), mask).outputs


class TransformerStates(nn.Module):
    """Embedded tokens (B, S, D) -> positions, dropout, encoder stack -> (B, S, D)."""

    def __init__(self, *, positions: PositionScheme, encoder: Encoder, dropout: float) -> None:
        super().__init__()
        self.positions, self.encoder, self.drop = positions, encoder, nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = self.drop(self.positions(x))
        return self.encoder(x, mask=mask[:, None, None, :])[0]  # (B, S, D)


class TextClassifierNet(nn.Module):
    """embed -> [prepend CLS] -> encoder states -> pooling -> dropout -> linear.

    Args:
        embed: ids (B, S) -> (B, S, E). states: (x, mask) -> (B, S, D). pooling: a ``POOLINGS`` module.
        head: D -> C. cls_dim: E to prepend a learned [CLS] vector, None otherwise. dropout: before the head.
    """

    def __init__(
        self, *, embed: nn.Module, states: nn.Module, pooling: nn.Module, head: nn.Linear, cls_dim: int | None,
        dropout: float,
    ) -> None:
        super().__init__()
        self.embed, self.states, self.pooling, self.head = embed, states, pooling, head
        self.cls = None if cls_dim is None else nn.Parameter(torch.randn(cls_dim) * cls_dim**-0.5)
        self.drop = nn.Dropout(dropout)

    def forward(self, tokens: Tensor) -> ClassifierOut:
        """tokens (B, S) right-padded ids -> :class:`ClassifierOut`."""
        mask = tokens != PAD  # (B, S)
        x = self.embed(tokens)  # (B, S, E)
        if self.cls is not None:
            x = torch.cat([self.cls.to(x.dtype).expand(x.size(0), 1, -1), x], dim=1)  # (B, 1+S, E)
            mask = torch.cat([mask.new_ones(mask.size(0), 1), mask], dim=1)
        pooled, weights = self.pooling(self.states(x, mask), mask)  # (B, D), (B, S') | None
        if weights is not None and self.cls is not None:
            weights = weights[:, 1:]
        return ClassifierOut(self.head(self.drop(pooled)), weights)
