"""Frozen specs of the digit classifiers: the recurrent attention model and its full-view baseline.

Each spec is also its family's CLI arguments (defaults and docs declared here, the paper's values in the
docs; ``glimpse.RecurrentAttentionModel`` and ``full_view.FullViewClassifier`` take them as ``**options``);
it derives the sizes the builder needs (the glimpse vector's length, the flattened canvas) and the
resolved core cell.
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
        in_channels: image channels C (1).
        glimpses: T, glimpses per image (paper: 6 for 60×60 translated).
        patch_size: g, side of every glimpse patch (paper: 12 for 60×60).
        scales: k, patches per glimpse, each ``scale_factor`` times larger (paper: 3).
        scale_factor: size ratio of consecutive patches (paper: 2).
        std: σ of the location policy in [-1, 1] units (fixed; paper: fixed, value not given).
        glimpse_hidden: |h_g| (paper: 128).
        location_hidden: |h_l| (paper: 128).
        glimpse_size: |g| (paper: 256).
        hidden_size: |h_t| (paper: 256).
        cell: recurrent core (rnn | gru | lstm | lstm_peephole; paper: rectifier RNN, see glimpse_net).

    Derived: ``glimpse_input`` = k·C·g² (the retina's output length), ``cells`` (the core's arm).
    """

    in_channels: int = 1
    glimpses: int = 6
    patch_size: int = 12
    scales: int = 3
    scale_factor: int = 2
    std: float = 0.15
    glimpse_hidden: int = 128
    location_hidden: int = 128
    glimpse_size: int = 256
    hidden_size: int = 256
    cell: Cell = "lstm"
    glimpse_input: int = field(init=False)
    cells: CellSpec = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "glimpse_input", self.scales * self.in_channels * self.patch_size**2)
        object.__setattr__(self, "cells", CELLS[self.cell])


@dataclass(frozen=True, kw_only=True)
class FullViewSpec:
    """The fully connected baseline over the whole canvas (Mnih et al. 2014, Table 1's "FC" rows).

    Args:
        in_channels: image channels C (1).
        canvas_size: canvas side H = W (60 translated; 28 centred); the input is C·H·W pixels.
        hidden_size: units in each hidden layer (paper: 64 or 256).
        layers: hidden layers (paper: 2).

    Derived: ``pixels`` = C·H·W, the input width.
    """

    in_channels: int = 1
    canvas_size: int = 60
    hidden_size: int = 256
    layers: int = 2
    pixels: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pixels", self.in_channels * self.canvas_size**2)
