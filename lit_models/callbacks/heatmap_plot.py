"""One attention heatmap figure that later drawings of the same shape redraw in place.

A figure is one row per layer: the head mean (with the token labels), then the heads side by side in one panel
(head h's map is the h-th tile, a blank column between tiles), colour scale fixed to [0, 1]. One panel for all
heads instead of one each: a six-layer, four-head figure has 12 panels instead of 30, and drawing cost goes with
the panels. Its first save lays it out (matplotlib's constrained layout: titles and rotated token labels
never overlap); the layout is then kept. A later drawing of the same map (the W&B slider's next validation) puts
its weights, labels and title into the same panels when they fit: same layers, heads and token counts, and no
label longer than the ones the layout made room for. Otherwise it is drawn anew.

Why: the figures were the largest part of a quick Transformer trial after its training steps (13.4 s of a 45 s
six-layer ``norm`` trial, AMD EPYC), and laying out and building a figure was about half of its cost. Measured on
that trial (same machine, ``benchmarks.trial_time``): 13.4 s with a panel per head, drawn anew each time; 8.7 s
redrawn in place where it fits; 7.4 s with the heads tiled as well. Its decoder maps still change shape between
drawings while the free-running output changes length, and are then drawn anew. A redrawn figure is, pixel for
pixel, the image a new one of the same drawing would be (``tests/models/test_heatmap_plot.py``).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.image import AxesImage  # noqa: E402
from torch import Tensor  # noqa: E402

DPI = 80


def _fit(labels: list[str], n: int) -> list[str]:
    """Pad or cut labels to n ticks (padding positions are labelled '<pad>')."""
    return (labels + ["<pad>"] * n)[:n]


def _longest(labels: list[str]) -> int:
    return max((len(label) for label in labels), default=0)


class AttentionPlot:
    """The heatmaps of one example's map kind, e.g. cross-attention of every layer and head.

    Args:
        layers: per layer, (H, T, S) attention weights of one example (rows = queries).
        x_labels: S key labels; y_labels: T query labels. title: the figure's title.
        x_title, y_title: the axis titles (on the head-mean column).
    """

    def __init__(self, layers: list[Tensor], *, x_labels: list[str], y_labels: list[str], title: str,
                 x_title: str = "key", y_title: str = "query") -> None:
        heads, t, s = layers[0].shape
        self.shape = (len(layers), heads, t, s)
        self.room = (_longest(_fit(x_labels, s)), _longest(_fit(y_labels, t)))
        cols, width = (2, 1 + heads) if heads > 1 else (1, 1)  # panels, and their width in map cells
        cell = min(3.0, max(1.6, 0.16 * max(t, s)))
        self.figure, axes = plt.subplots(len(layers), cols, figsize=(cell * width + 1.2, cell * len(layers) + 1.0),
                                         squeeze=False, layout="constrained",
                                         gridspec_kw={"width_ratios": [1, heads][:cols]})
        self.images: list[list[AxesImage]] = []
        for row, weights in enumerate(layers):
            self.images.append([axes[row, col].imshow(m, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto",
                                                      interpolation="nearest")
                                for col, m in enumerate(_panels(weights))])
            axes[row, 0].set_title(f"layer {row + 1} · mean", fontsize=7)
            axes[row, 0].set_xlabel(x_title, fontsize=7)
            axes[row, 0].set_ylabel(y_title, fontsize=7)
            if cols > 1:  # token labels on the head-mean column only; the tiles are named by head
                axes[row, 1].set_title(f"layer {row + 1} · heads 1-{heads}", fontsize=7)
                axes[row, 1].set_xticks([h * (s + 1) + (s - 1) / 2 for h in range(heads)],
                                        [f"head {h + 1}" for h in range(heads)], fontsize=6)
                axes[row, 1].set_yticks([])
        self.labelled: list[Axes] = [axes[row, 0] for row in range(len(layers))]
        self._label(x_labels, y_labels)
        self.suptitle = self.figure.suptitle(title, fontsize=8)
        self.figure.colorbar(self.images[-1][0], ax=axes.ravel().tolist(), shrink=0.5, label="attention weight")

    def _label(self, x_labels: list[str], y_labels: list[str]) -> None:
        _, _, t, s = self.shape
        for ax in self.labelled:
            ax.set_xticks(range(s), _fit(x_labels, s), rotation=90, fontsize=6)
            ax.set_yticks(range(t), _fit(y_labels, t), fontsize=6)

    def fits(self, layers: list[Tensor], *, x_labels: list[str], y_labels: list[str]) -> bool:
        """Whether a drawing of ``layers`` with these labels can reuse this figure's layout."""
        _, _, t, s = self.shape
        shape = (len(layers), *layers[0].shape)
        return shape == self.shape and _longest(_fit(x_labels, s)) <= self.room[0] and \
            _longest(_fit(y_labels, t)) <= self.room[1]

    def redraw(self, layers: list[Tensor], *, x_labels: list[str], y_labels: list[str], title: str) -> None:
        """Put new weights, labels and title into the panels (``fits`` must hold)."""
        for images, weights in zip(self.images, layers, strict=True):
            for image, m in zip(images, _panels(weights), strict=True):
                image.set_data(m)
        self._label(x_labels, y_labels)
        self.suptitle.set_text(title)

    def save(self, path: Path) -> None:
        """Write the PNG; the first save lays the figure out, later ones keep that layout."""
        self.figure.savefig(path, dpi=DPI)
        self.figure.set_layout_engine("none")  # the positions the first save computed stay

    def close(self) -> None:
        plt.close(self.figure)


def _panels(weights: Tensor) -> list[np.ndarray]:
    """(H, T, S) -> the head mean (T, S), then (more than one head) the heads tiled (T, H·(S+1) - 1) with a
    blank (NaN) column between two heads, as float arrays."""
    w = weights.float().cpu()
    heads, t, s = w.shape
    if heads == 1:
        return [w[0].numpy()]
    tiles = torch.cat([w, torch.full((heads, t, 1), float("nan"))], dim=-1)  # (H, T, S + 1)
    return [w.mean(0).numpy(), tiles.permute(1, 0, 2).reshape(t, heads * (s + 1))[:, :-1].numpy()]
