"""Attention figures: head-mean and per-head heatmaps with token labels, fixed colour scale [0, 1]
(``heatmap_plot.AttentionPlot``: the heads tiled in one panel a layer, later drawings redrawn in place);
for captioners, per-word attention overlays on the image (Xu et al. 2015, Fig. 2-3 style).

Drawn on rank 0 only, for a fixed set of validation examples (the module's ``figure_batch``),
saved under ``<run_dir>/figures/`` (latest epoch) and logged to W&B as images. Heatmaps also leave their
weights and labels as ``figures/<name>.json`` (``_heatmaps``), from which ``ablations.reports.report`` draws the
arms side by side natively. Decoder rows are labelled ``fed→predicted`` (``decoder_row_labels``). A module that
draws its own figures implements ``figure_plots(epoch) -> {name: Figure}`` (``protocols.PlotsFigures``:
the captioner, RAM); otherwise its ``figure_maps()`` (``protocols.HasAttentionMaps``) are drawn as heatmaps.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import lightning as L
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from lightning.pytorch.loggers import WandbLogger  # noqa: E402
from torch import Tensor  # noqa: E402

from attnlab_core.atomic import atomic_write  # noqa: E402
from attnlab_core.batches import IMAGE_MEAN, IMAGE_STD  # noqa: E402
from attnlab_core.tokens import PAD  # noqa: E402
from lit_models.callbacks.heatmap_plot import DPI, AttentionPlot  # noqa: E402
from lit_models.protocols import HasAttentionMaps, PlotsFigures  # noqa: E402

log = logging.getLogger(__name__)


def plot_caption_attention(image: Tensor, weights: Tensor, *, words: list[str], title: str,
                           columns: int = 6) -> plt.Figure:
    """The image, then one panel per generated word with its attention over the grid overlaid.

    Args:
        image: (3, H, W) normalised with ``IMAGE_MEAN`` / ``IMAGE_STD`` (undone here for display).
        weights: (T, G, G) attention of the step that produced each word (soft α, or the one-hot
            cell of hard attention), up-sampled to the image (nearest: each cell stays a square).
        words: T words. The colour scale is [0, max weight of the figure] (stated in the title).
    """
    mean, std = torch.tensor(IMAGE_MEAN)[:, None, None], torch.tensor(IMAGE_STD)[:, None, None]
    rgb = (image.float() * std + mean).clamp(0, 1).permute(1, 2, 0).numpy()  # (H, W, 3)
    h, w = rgb.shape[:2]
    maps = torch.nn.functional.interpolate(weights.float()[:, None], size=(h, w), mode="nearest")[:, 0]  # (T, H, W)
    vmax = max(float(maps.max()), 1e-6)
    panels = 1 + len(words)
    rows = -(-panels // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(1.6 * columns, 1.75 * rows + 0.4), squeeze=False)
    for ax in axes.ravel():
        ax.axis("off")
    axes[0, 0].imshow(rgb)
    axes[0, 0].set_title("image", fontsize=7)
    for t, word in enumerate(words):
        ax = axes.ravel()[t + 1]
        ax.imshow(rgb)
        ax.imshow(maps[t].numpy(), cmap="inferno", alpha=0.6, vmin=0.0, vmax=vmax)
        ax.set_title(word, fontsize=8)
    fig.suptitle(f"{title} · colour scale 0-{vmax:.2f}", fontsize=8)
    return fig


def longest_examples(batch: tuple, n: int) -> tuple:
    """The ``n`` examples of a batch (a NamedTuple whose first field is ``src`` (B, S)) with the most
    non-PAD source tokens, ties in batch order, on CPU: the figures then show a long alignment, not
    whichever example the batch happened to start with."""
    lengths = (batch[0] != PAD).sum(1)  # (B,)
    idx = torch.sort(lengths, descending=True, stable=True).indices[:n]
    return type(batch)(*(f[idx.to(f.device)].cpu() if isinstance(f, Tensor) else [f[i] for i in idx.tolist()]
                         for f in batch))


def logged_step(trainer: L.Trainer) -> int:
    """The step Lightning hands the loggers with a validation's metrics (its fit loop's count of batches that
    stepped, W&B's ``trainer/global_step`` of that row), which ``trainer.global_step`` can pass by one (it counts
    optimizer steps, and a validation runs after the step's count moved on). Private in Lightning 2.6:
    tests/cli/test_lightning_private.py checks it is there."""
    loop = getattr(trainer.fit_loop, "epoch_loop", None)
    return int(getattr(loop, "_batches_that_stepped", trainer.global_step))


class AttentionFigures(L.Callback):
    """Plot every attention map of the module's fixed figure examples: when ``fit`` ends, right away
    outside ``fit``, and, when a W&B logger keeps every drawing's images, at up to ``max_drawings``
    validations spread evenly over training (W&B's image slider shows the maps as they form).

    Without W&B each drawing overwrites the previous one in ``figures/``, so during ``fit`` only the last
    is ever read; drawing only at the end (with the final weights, in eval mode) saves the rest:
    they were 13% of the demo's quick trial and 6% of a quick ``scaling`` trial (BENCHMARKS.md, "time to
    answer"). With W&B, drawing at every validation was again 13% of the demo's trial (40 validations,
    AMD EPYC run); a drawing is kept only when training has passed the next of ``max_drawings`` evenly
    spaced steps (of ``trainer.estimated_stepping_batches``), so the slider's spacing does not depend on
    how often the run validates. A fit that crashes leaves no end-of-fit figures (a preempted one draws
    them when it resumes and ends).

    Args:
        run_dir: figures go to ``run_dir/figures``. every_n_epochs: consider validations of every n-th
        epoch only. max_drawings: the most drawings one ``fit`` logs to W&B (the last at its end);
        ``--run.figure_drawings`` on the command line.
    """

    def __init__(self, *, run_dir: Path, every_n_epochs: int = 1, max_drawings: int = 8) -> None:
        if max_drawings < 1:
            raise ValueError(f"max_drawings must be >= 1, got {max_drawings}")
        self.fig_dir = run_dir / "figures"
        self.every_n_epochs, self.max_drawings = every_n_epochs, max_drawings
        self._pending_epoch: int | None = None  # a skipped drawing still owed at the end of fit
        self._slot = 0  # drawings' evenly spaced slots already passed in this fit
        self._plots: dict[str, AttentionPlot] = {}  # the last drawing of each heatmap, redrawn in place where it fits

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._pending_epoch, self._slot = None, 0

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        if trainer.current_epoch % self.every_n_epochs:
            return
        if trainer.state.fn == "fit":
            self._pending_epoch = trainer.current_epoch
            if any(isinstance(lg, WandbLogger) for lg in trainer.loggers) and self._slot_passed(trainer):
                self._pending_epoch = None
                self._draw(trainer, pl_module, trainer.current_epoch)
            return
        self._draw(trainer, pl_module, trainer.current_epoch)

    def _slot_passed(self, trainer: L.Trainer) -> bool:
        """Whether training has passed the next of ``max_drawings`` evenly spaced steps since the last drawing
        (every validation when the number of steps is unknown, as with ``max_epochs=-1`` and no ``max_steps``)."""
        total = trainer.estimated_stepping_batches
        if not math.isfinite(total) or total <= 0:
            return True
        slot = min(self.max_drawings, int(trainer.global_step * self.max_drawings // total))
        passed, self._slot = slot > self._slot, max(slot, self._slot)
        return passed

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._pending_epoch is None or not trainer.is_global_zero:
            return
        epoch, self._pending_epoch = self._pending_epoch, None
        was_training = pl_module.training
        pl_module.eval()
        try:
            with trainer.precision_plugin.forward_context():
                self._draw(trainer, pl_module, epoch)
        finally:
            pl_module.train(was_training)

    def _draw(self, trainer: L.Trainer, pl_module: L.LightningModule, epoch: int) -> None:
        figures: dict[str, plt.Figure] = {}
        specs: dict[str, dict] = {}
        records: dict[str, dict] = {}
        if isinstance(pl_module, PlotsFigures) and pl_module.figure_batch is not None:
            figures = pl_module.figure_plots(epoch)
        elif isinstance(pl_module, HasAttentionMaps) and pl_module.figure_batch is not None:
            specs, records = _heatmaps(pl_module, epoch)
        else:
            return
        self.fig_dir.mkdir(parents=True, exist_ok=True)
        paths = {name: self.fig_dir / f"{name}.png" for name in [*figures, *specs]}
        for name, fig in figures.items():
            fig.savefig(paths[name], dpi=DPI)
            plt.close(fig)
        for name, spec in specs.items():
            self._plot(name, spec).save(paths[name])
        for name, record in records.items():  # the weights themselves, for reports that draw them natively
            atomic_write(self.fig_dir / f"{name}.json", json.dumps(record).encode())
        wandb_loggers = [lg for lg in trainer.loggers if isinstance(lg, WandbLogger)]
        if wandb_loggers and paths:
            import wandb

            # one row holding every map of this drawing, at the step its validation's metrics were logged at
            images = {f"attention/{name.replace('_ex', '/ex')}": [wandb.Image(str(path))]
                      for name, path in paths.items()}
            for logger in wandb_loggers:
                logger.log_metrics(images, step=logged_step(trainer))

    def _plot(self, name: str, spec: dict) -> AttentionPlot:
        """The figure of ``name`` with ``spec`` drawn in it: the last drawing's, redrawn in place where it fits."""
        plot = self._plots.get(name)
        labels = {"x_labels": spec["x_labels"], "y_labels": spec["y_labels"]}
        if plot is not None and plot.fits(spec["layers"], **labels):
            plot.redraw(spec["layers"], **labels, title=spec["title"])
            return plot
        if plot is not None:
            plot.close()
        self._plots[name] = AttentionPlot(**spec)
        return self._plots[name]

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        for plot in self._plots.values():
            plot.close()
        self._plots = {}


def _heatmaps(pl_module: L.LightningModule, epoch: int) -> tuple[dict[str, dict], dict[str, dict]]:
    """``{kind}_ex{i}`` -> the :class:`~lit_models.callbacks.heatmap_plot.AttentionPlot` arguments of every map kind of
    the module's ``figure_maps()``, and the record of what it shows: ``kind``, ``epoch``, ``example``, ``layers`` (per
    layer, the (T, S) head-mean weights as nested lists, 4 decimals), ``x_labels`` (keys) and ``y_labels``
    (queries), trimmed to the real tokens, and the axis titles ``x_title`` / ``y_title``."""
    maps, src_labels, out_labels = pl_module.figure_maps()
    specs, records = {}, {}
    for kind, layers in _group_by_kind(maps).items():
        if not any(bool(w.any()) for w in layers):  # a model without this attention (attention=none): nothing to draw
            continue
        for i in range(layers[0].size(0)):
            trimmed = [_trim(w[i], kind, len(out_labels[i]), len(src_labels[i])) for w in layers]
            x_labels, y_labels = _keys(kind, src_labels[i], out_labels[i]), _queries(kind, src_labels[i],
                                                                                       out_labels[i])
            name, (x_title, y_title) = f"{kind}_ex{i}", axis_titles(kind)
            specs[name] = {"layers": trimmed, "x_labels": x_labels, "y_labels": y_labels, "x_title": x_title,
                           "y_title": y_title, "title": f"{kind} attention · example {i} · epoch {epoch}"}
            records[name] = {"kind": kind, "epoch": epoch, "example": i, "x_labels": x_labels, "y_labels": y_labels,
                             "x_title": x_title, "y_title": y_title,
                             "layers": [w.float().mean(0).cpu().round(decimals=4).tolist() for w in trimmed]}
    return specs, records


def _group_by_kind(maps: dict[str, Tensor]) -> dict[str, list[Tensor]]:
    """{'cross/layer1': w1, 'cross/layer2': w2, ...} -> {'cross': [w1, w2, ...]} in layer order."""
    grouped: dict[str, list[Tensor]] = {}
    for name in sorted(maps, key=lambda n: (n.split("/")[0], int(n.rsplit("layer", 1)[-1] or 0))):
        grouped.setdefault(name.split("/")[0], []).append(maps[name])
    return grouped


DECODER_KINDS = ("cross", "dec_self")  # maps whose queries are decoder steps of an encoder-decoder
START = "<s>"


def fed_tokens(out: list[str]) -> list[str]:
    """The token each decoder step is fed (teacher forcing on the drawn output): <s>, then the previous output."""
    return [START, *out[:-1]]


def decoder_row_labels(out: list[str]) -> list[str]:
    """``fed→predicted`` per decoder step: row t of a decoder map is the query fed out[t-1] that predicts out[t].

    Labelling rows with the predicted token alone reads a decoder that attends to the source of the token it
    was just fed (some trained recurrent decoders do: their maps are sharp one row below the token predicted)
    as misaligned; naming both says what each row is (``lit_models.callbacks.probes.AlignmentMass`` measures both
    readings).
    """
    return [f"{f}→{p}" for f, p in zip(fed_tokens(out), out, strict=True)]


def axis_titles(kind: str) -> tuple[str, str]:
    """(key axis, query axis) titles of a map kind."""
    if kind.startswith("enc"):
        return "source token (key)", "source token (query)"
    if kind in DECODER_KINDS:
        return ("source token (key)" if kind == "cross" else "decoder input (key)"), "decoder step: fed→predicted"
    return "token (key)", "token (query)"


def _queries(name: str, src: list[str], out: list[str]) -> list[str]:
    if name.startswith("enc"):
        return src
    return decoder_row_labels(out) if name.split("/")[0] in DECODER_KINDS else out


def _keys(name: str, src: list[str], out: list[str]) -> list[str]:
    if name.startswith("dec_self"):
        return fed_tokens(out)  # decoder self-attention reads the decoder's inputs, the fed tokens
    return src


def _trim(w: Tensor, name: str, t_out: int, s_src: int) -> Tensor:
    """Cut padding rows/columns: w (H, Tq, Tk) -> the real queries and keys of this example."""
    tq = s_src if name.startswith("enc") else t_out
    tk = t_out if name.startswith("dec_self") else s_src
    return w[..., :tq, :tk]
