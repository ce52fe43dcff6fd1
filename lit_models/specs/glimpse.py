"""Frozen specs of the digit classifiers: the recurrent attention model and its full-view baseline.

Each module builds its spec from its own arguments; the spec derives, once, the sizes the builder
needs (the glimpse vector's length, the flattened canvas) and the resolved core cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lit_models.axes import Cell
from lit_models.blocks.recurrent import CellSpec
from lit_models.registries import CELLS


@dataclass(frozen=True, kw_only=True)
class RamSpec:
    """The recurrent attention model (Mnih et al. 2014, Fig. 1).

    Args:
        in_channels: image channels C. glimpses: T, glimpses per image.
        patch_size: g, side of every glimpse patch. scales: k, patches per glimpse.
        scale_factor: size ratio of consecutive patches. std: σ of the Gaussian location policy.
        glimpse_hidden: |h_g|. location_hidden: |h_l|. glimpse_size: |g|. hidden_size: |h_t|.
        cell: the recurrent core's cell arm (``axes.Cell``).

    Derived: ``glimpse_input`` = k·C·g² (the retina's output length), ``cells`` (the core's arm).
    """

    in_channels: int
    glimpses: int
    patch_size: int
    scales: int
    scale_factor: int
    std: float
    glimpse_hidden: int
    location_hidden: int
    glimpse_size: int
    hidden_size: int
    cell: Cell
    glimpse_input: int = field(init=False)
    cells: CellSpec = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "glimpse_input", self.scales * self.in_channels * self.patch_size**2)
        object.__setattr__(self, "cells", CELLS[self.cell])


@dataclass(frozen=True, kw_only=True)
class FullViewSpec:
    """The fully connected baseline over the whole canvas (Mnih et al. 2014, Table 1's "FC" rows).

    Args:
        in_channels: image channels C. canvas_size: canvas side H = W.
        hidden_size: units in each hidden layer. layers: hidden layers.

    Derived: ``pixels`` = C·H·W, the input width.
    """

    in_channels: int
    canvas_size: int
    hidden_size: int
    layers: int
    pixels: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pixels", self.in_channels * self.canvas_size**2)
