"""Recurrent attention model (RAM; Mnih, Heess, Graves & Kavukcuoglu 2014) as a LightningModule.

The question it answers: can a classifier that sees only a few small, sampled glimpses — and
learns *where* to look by reinforcement — classify a digit somewhere on a large canvas? The
network is ``blocks.glimpse_net.RecurrentAttention`` (wired by ``builders.build_ram``); this module
adds the hybrid loss (§3.2):

    L = CE(f_a(h_T), y)  +  λ · [ −(1/B) Σ_b Σ_t (R_b − b_t) log π(l_t | h_t) ]  +  (1/BT) Σ (R_b − b_t)²

with reward R = 1 when the class after the last glimpse is correct, else 0 (eq. 2: the REINFORCE
estimate (1/M) Σ_i Σ_t ∇ log π(l_t^i | s_{1:t}^i) (R^i − b_t), with a learned per-step baseline
b_t fitted by MSE). Validation and test place glimpses at the policy mean (no sampling) and log
``val/acc``, ``val/loss`` (cross-entropy), ``val/glimpses_on_digit`` (the share of glimpse
centres inside the digit's box; 28²/60² ≈ 0.22 for uniformly random glimpses) and ``test/*``.
Figures: the glimpse trajectories of a fixed set of validation canvases (``figure_plots``,
drawn by ``figures.AttentionFigures``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from torch import Tensor, nn  # noqa: E402
from torchmetrics import MeanMetric  # noqa: E402
from torchmetrics.classification import MulticlassAccuracy  # noqa: E402

from attnlab_core.batches import DigitBatch  # noqa: E402
from attnlab_core.options import with_defaults  # noqa: E402
from lit_models.blocks.glimpse_net import RamOutput  # noqa: E402
from lit_models.builders import build_ram  # noqa: E402
from lit_models.specs import RamSpec  # noqa: E402
from lit_models.training.evaluation import EvaluationModule  # noqa: E402
from lit_models.training.optim import CONSTANT_LR, module_adamw  # noqa: E402
from lit_models.validation import check_data_matches  # noqa: E402


class HybridLoss(NamedTuple):
    """total = ce + reinforce_weight·policy + baseline; reward (B,) in {0, 1}."""

    total: Tensor
    ce: Tensor
    policy: Tensor
    baseline: Tensor
    reward: Tensor


def hybrid_loss(out: RamOutput, labels: Tensor, *, reinforce_weight: float) -> HybridLoss:
    """The RAM training loss (Mnih et al. 2014, §3.2 and eq. 2) of one sampled episode per example.

    Args:
        out: the network's output for sampled locations (log_probs and baselines (B, T)).
        labels: (B,) gold classes.
        reinforce_weight: λ, weight of the REINFORCE surrogate.
    """
    ce = F.cross_entropy(out.logits.float(), labels)
    reward = (out.logits.detach().argmax(-1) == labels).float()  # (B,)
    returns = reward.unsqueeze(1).expand_as(out.baselines)  # (B, T): R_t = R (one reward, at the end)
    advantage = (returns - out.baselines).detach()  # (B, T)
    policy = -(advantage * out.log_probs).sum(1).mean()
    baseline = F.mse_loss(out.baselines, returns)
    return HybridLoss(ce + reinforce_weight * policy + baseline, ce, policy, baseline, reward)


class RecurrentAttentionModel(EvaluationModule):
    """RAM classifier: T glimpses chosen by a Gaussian policy, trained with CE + REINFORCE.

    Args:
        num_classes: classes of the action network (10 digits).
        reinforce_weight: λ, weight of the REINFORCE term.
        options: the architecture (``specs.RamSpec``: in_channels, glimpses, patch_size, ..., cell), then
            the optimiser's ``lr`` and ``weight_decay`` (``optim.Optimisation``; a constant learning rate:
            the paper trains with SGD and momentum, this with AdamW as most reimplementations do).
    """

    option_groups = (with_defaults(RamSpec), CONSTANT_LR)
    figure_examples = 4  # glimpse-path figures of the first validation canvases

    def __init__(self, *, num_classes: int = 10, reinforce_weight: float = 1.0, **options: Any) -> None:
        groups = self.options(**options)
        spec, _ = groups
        super().__init__()
        self.save_hyperparameters()
        self.save_options(groups)
        self.net = build_ram(spec, num_classes=num_classes)
        self.metrics = nn.ModuleDict({split: nn.ModuleDict({
            "acc": MulticlassAccuracy(num_classes=num_classes, average="micro"),
            "loss": MeanMetric(),
            "glimpses_on_digit": MeanMetric(),
        }) for split in ("val", "test")})
        self.tokens_seen = 0  # images seen (the run summary's throughput counter)

    def setup(self, stage: str) -> None:
        """Fail early, in one line, when the data disagrees with ``num_classes`` / ``in_channels``."""
        check_data_matches(self, ("num_classes", "in_channels"))

    def forward(self, images: Tensor, *, sample: bool = False) -> RamOutput:
        return self.net(images, sample=sample)

    def training_step(self, batch: DigitBatch, batch_idx: int) -> Tensor | None:
        loss = hybrid_loss(self.net(batch.images, sample=True), batch.labels,
                           reinforce_weight=self.hparams.reinforce_weight)
        if (checked := self._checked(loss.total)) is not loss.total:
            return checked  # diverged
        n = batch.labels.numel()
        self.tokens_seen += n
        self.log("train/loss", loss.total, prog_bar=True, batch_size=n)
        self.log_dict({"train/ce": loss.ce, "train/reinforce": loss.policy, "train/baseline_mse": loss.baseline,
                       "train/reward": loss.reward.mean()}, batch_size=n)
        return loss.total

    def _evaluate(self, batch: DigitBatch, split: str) -> None:
        out = self.net(batch.images, sample=False)
        m = self.metrics[split]
        m["loss"].update(F.cross_entropy(out.logits.float(), batch.labels), weight=batch.labels.numel())
        m["acc"].update(out.logits.argmax(-1), batch.labels)
        m["glimpses_on_digit"].update(on_digit(out.locations, batch.boxes, height=batch.images.size(-2),
                                               width=batch.images.size(-1)).float())

    def predict_step(self, batch: DigitBatch, batch_idx: int) -> list[int]:
        return self.net(batch.images, sample=False).logits.argmax(-1).tolist()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return module_adamw(self, lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)

    # ------------------------------------------------------------------ figures (rank 0 only)
    @torch.no_grad()
    def figure_plots(self, epoch: int) -> dict[str, plt.Figure]:
        """``glimpses_ex{i}`` -> trajectory figure of each fixed validation canvas (policy mean)."""
        batch = self.figure_batch
        out = self.net(batch.images.to(self.device), sample=False)
        sizes = self.net.sensor.sizes
        return {
            f"glimpses_ex{i}": plot_glimpses(
                batch.images[i, 0], out.locations[i].cpu(), sizes=sizes, box=batch.boxes[i].tolist(),
                title=f"gold {int(batch.labels[i])} · pred {int(out.logits[i].argmax())} · epoch {epoch}",
            )
            for i in range(batch.labels.numel())
        }


def to_pixels(locations: Tensor, *, height: int, width: int) -> Tensor:
    """(..., 2) (x, y) in [-1, 1] -> (..., 2) pixel centres (x, y), as ``glimpse_net.patch_corners``."""
    return (locations + 1) / 2 * locations.new_tensor([float(width), float(height)])


def on_digit(locations: Tensor, boxes: Tensor, *, height: int, width: int) -> Tensor:
    """Whether each glimpse centre lies in the digit's box: locations (B, T, 2), boxes (B, 4) -> (B, T) bool."""
    centres = to_pixels(locations, height=height, width=width)  # (B, T, 2)
    low, high = boxes[:, None, :2].to(centres), boxes[:, None, 2:].to(centres)  # (B, 1, 2) each
    return ((centres >= low) & (centres < high)).all(-1)


def plot_glimpses(image: Tensor, locations: Tensor, *, sizes: list[int], box: list[int], title: str) -> plt.Figure:
    """The canvas with the glimpse path, then one panel per step with that glimpse's k patch boxes.

    Args:
        image: (H, W) in [0, 1]. locations: (T, 2) (x, y) in [-1, 1], in glimpse order.
        sizes: patch sides in pixels, smallest first. box: the digit's (x0, y0, x1, y1), dashed.
    """
    h, w = image.shape
    centres = to_pixels(locations, height=h, width=w).numpy()  # (T, 2)
    steps = centres.shape[0]
    fig, axes = plt.subplots(1, steps + 1, figsize=(1.7 * (steps + 1), 2.1), squeeze=False)
    for col, ax in enumerate(axes[0]):
        ax.imshow(image.float().numpy(), cmap="gray", vmin=0.0, vmax=1.0, extent=(0, w, h, 0))
        ax.add_patch(Rectangle((box[0], box[1]), box[2] - box[0], box[3] - box[1], fill=False,
                               edgecolor="tab:green", linestyle="--", linewidth=0.8))
        ax.set_xlim(0, w)
        ax.set_ylim(h, 0)
        ax.set_xticks([])
        ax.set_yticks([])
        if col == 0:
            ax.plot(centres[:, 0], centres[:, 1], "-o", color="tab:orange", markersize=3, linewidth=1)
            for t, (x, y) in enumerate(centres):
                ax.annotate(str(t + 1), (x, y), color="yellow", fontsize=6, xytext=(2, 2), textcoords="offset points")
            ax.set_title("path", fontsize=7)
            continue
        x, y = centres[col - 1]
        for k, size in enumerate(sizes):
            ax.add_patch(Rectangle((x - size / 2, y - size / 2), size, size, fill=False, linewidth=1,
                                   edgecolor=plt.cm.autumn(k / max(1, len(sizes) - 1))))
        ax.set_title(f"glimpse {col}", fontsize=7)
    fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    return fig
