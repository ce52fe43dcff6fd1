"""Attention figures: head-mean and per-head heatmaps with token labels, fixed colour scale [0, 1].

Drawn on rank 0 only, for a fixed set of validation examples (the module's ``figure_batch``),
saved under ``<run_dir>/figures/`` (latest epoch) and logged to W&B as images.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import lightning as L
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from lightning.pytorch.loggers import WandbLogger  # noqa: E402
from torch import Tensor  # noqa: E402

log = logging.getLogger(__name__)


def plot_attention(weights: Tensor, *, x_labels: list[str], y_labels: list[str], title: str) -> plt.Figure:
    """Head mean plus one panel per head.

    Args:
        weights: (H, T, S) attention weights of one example (rows = queries/outputs).
        x_labels: S key labels (source tokens); y_labels: T query labels (output tokens).
    """
    heads, t, s = weights.shape
    panels = heads + 1 if heads > 1 else 1
    cols = min(panels, 5)
    rows = math.ceil(panels / cols)
    size = max(2.5, 0.28 * max(t, s))
    fig, axes = plt.subplots(rows, cols, figsize=(size * cols, size * rows), squeeze=False)
    maps = [weights.mean(0)] + ([weights[h] for h in range(heads)] if heads > 1 else [])
    names = ["mean over heads"] + [f"head {h + 1}" for h in range(heads)]
    for ax in axes.flat[len(maps):]:
        ax.axis("off")
    image = None
    for ax, m, name in zip(axes.flat, maps, names, strict=False):
        image = ax.imshow(m.float().cpu().numpy(), vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
        ax.set_title(name, fontsize=8)
        ax.set_xticks(range(s), _fit(x_labels, s), rotation=90, fontsize=6)
        ax.set_yticks(range(t), _fit(y_labels, t), fontsize=6)
    fig.suptitle(title, fontsize=9)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.6)
    return fig


def _fit(labels: list[str], n: int) -> list[str]:
    """Pad or cut labels to n ticks (padding positions are labelled '<pad>')."""
    return (labels + ["<pad>"] * n)[:n]


class AttentionFigures(L.Callback):
    """After each validation epoch, plot every attention map of the module's fixed figure examples."""

    def __init__(self, *, run_dir: Path, every_n_epochs: int = 1) -> None:
        self.fig_dir = run_dir / "figures"
        self.every_n_epochs = every_n_epochs

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        if getattr(pl_module, "figure_batch", None) is None or trainer.current_epoch % self.every_n_epochs:
            return
        maps, src_labels, out_labels = pl_module.figure_maps()
        self.fig_dir.mkdir(parents=True, exist_ok=True)
        paths = {}
        for name, weights in maps.items():
            for i in range(weights.size(0)):
                w = _trim(weights[i], name, len(out_labels[i]), len(src_labels[i]))
                title = f"{name} · example {i} · epoch {trainer.current_epoch}"
                fig = plot_attention(w, x_labels=_keys(name, src_labels[i], out_labels[i]),
                                     y_labels=_queries(name, src_labels[i], out_labels[i]), title=title)
                path = self.fig_dir / f"{name.replace('/', '_')}_ex{i}.png"
                fig.savefig(path, dpi=90, bbox_inches="tight")
                plt.close(fig)
                paths[f"attention/{name}/ex{i}"] = path
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                for key, path in paths.items():
                    logger.log_image(key=key, images=[str(path)], step=trainer.global_step)


def _queries(name: str, src: list[str], out: list[str]) -> list[str]:
    return src if name.startswith("enc") else out


def _keys(name: str, src: list[str], out: list[str]) -> list[str]:
    return out if name.startswith("dec_self") else src


def _trim(w: Tensor, name: str, t_out: int, s_src: int) -> Tensor:
    """Cut padding rows/columns: w (H, Tq, Tk) -> the real queries and keys of this example."""
    tq = s_src if name.startswith("enc") else t_out
    tk = t_out if name.startswith("dec_self") else s_src
    return w[..., :tq, :tk]
