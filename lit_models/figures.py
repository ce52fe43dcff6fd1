"""Attention figures: head-mean and per-head heatmaps with token labels, fixed colour scale [0, 1].

Drawn on rank 0 only, for a fixed set of validation examples (the module's ``figure_batch``),
saved under ``<run_dir>/figures/`` (latest epoch) and logged to W&B as images.
"""

from __future__ import annotations

import logging
from pathlib import Path

import lightning as L
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from lightning.pytorch.loggers import WandbLogger  # noqa: E402
from torch import Tensor  # noqa: E402

log = logging.getLogger(__name__)


def plot_attention(layers: list[Tensor], *, x_labels: list[str], y_labels: list[str], title: str) -> plt.Figure:
    """One row per layer: the head mean, then one panel per head, colour scale fixed to [0, 1].

    Args:
        layers: per layer, (H, T, S) attention weights of one example (rows = queries).
        x_labels: S key labels; y_labels: T query labels.
    """
    heads, t, s = layers[0].shape
    cols = 1 + (heads if heads > 1 else 0)
    cell = min(3.0, max(1.6, 0.16 * max(t, s)))
    fig, axes = plt.subplots(len(layers), cols, figsize=(cell * cols + 0.8, cell * len(layers) + 0.6),
                             squeeze=False)
    image = None
    for row, weights in enumerate(layers):
        maps = [weights.mean(0)] + ([weights[h] for h in range(heads)] if heads > 1 else [])
        for col, m in enumerate(maps):
            ax = axes[row, col]
            image = ax.imshow(m.float().cpu().numpy(), vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
            ax.set_title(f"layer {row + 1} · {'mean' if col == 0 else f'head {col}'}", fontsize=7)
            labelled = col == 0  # tick labels on the head-mean column only: ticks dominate drawing time
            ax.set_xticks(range(s) if labelled else [], _fit(x_labels, s) if labelled else [], rotation=90,
                          fontsize=5)
            ax.set_yticks(range(t) if labelled else [], _fit(y_labels, t) if labelled else [], fontsize=5)
    fig.suptitle(title, fontsize=8)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.5)
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
        for kind, layers in _group_by_kind(maps).items():
            for i in range(layers[0].size(0)):
                trimmed = [_trim(w[i], kind, len(out_labels[i]), len(src_labels[i])) for w in layers]
                fig = plot_attention(
                    trimmed, x_labels=_keys(kind, src_labels[i], out_labels[i]),
                    y_labels=_queries(kind, src_labels[i], out_labels[i]),
                    title=f"{kind} attention · example {i} · epoch {trainer.current_epoch}",
                )
                path = self.fig_dir / f"{kind}_ex{i}.png"
                fig.savefig(path, dpi=80)
                plt.close(fig)
                paths[f"attention/{kind}/ex{i}"] = path
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                for key, path in paths.items():
                    logger.log_image(key=key, images=[str(path)], step=trainer.global_step)


def _group_by_kind(maps: dict[str, Tensor]) -> dict[str, list[Tensor]]:
    """{'cross/layer1': w1, 'cross/layer2': w2, ...} -> {'cross': [w1, w2, ...]} in layer order."""
    grouped: dict[str, list[Tensor]] = {}
    for name in sorted(maps, key=lambda n: (n.split("/")[0], int(n.rsplit("layer", 1)[-1] or 0))):
        grouped.setdefault(name.split("/")[0], []).append(maps[name])
    return grouped


def _queries(name: str, src: list[str], out: list[str]) -> list[str]:
    return src if name.startswith("enc") else out


def _keys(name: str, src: list[str], out: list[str]) -> list[str]:
    return out if name.startswith("dec_self") else src


def _trim(w: Tensor, name: str, t_out: int, s_src: int) -> Tensor:
    """Cut padding rows/columns: w (H, Tq, Tk) -> the real queries and keys of this example."""
    tq = s_src if name.startswith("enc") else t_out
    tk = t_out if name.startswith("dec_self") else s_src
    return w[..., :tq, :tk]
