"""Text classification (sentiment): a recurrent or Transformer encoder, a pooling, a linear head.

The question it answers: how should a sequence of states become one decision? ``--model.pooling``
is last | mean | max | attention | cls (``lit_models.blocks.pooling``); attention pooling follows
Yang et al. 2016 (HAN word attention) / Lin et al. 2017 (one hop) and its weights are drawn as
token-importance figures. Metrics: ``val/acc``, ``val/f1`` (macro-F1), ``val/loss`` and ``test/*``
(summed over DDP ranks, ``evaluation``). Figures go to ``<trainer.default_root_dir>/figures/``
(the run directory under the CLI) and to W&B when a WandbLogger is attached.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from lightning.pytorch.loggers import WandbLogger  # noqa: E402
from torch import Tensor, nn  # noqa: E402
from torchmetrics import MeanMetric  # noqa: E402
from torchmetrics.classification import (  # noqa: E402
    MulticlassAccuracy,
    MulticlassConfusionMatrix,
    MulticlassF1Score,
)

from attnlab_core.errors import UsageError  # noqa: E402
from attnlab_core.options import with_defaults  # noqa: E402
from attnlab_core.tokens import PAD  # noqa: E402
from lit_models.blocks.classifier_net import ClassifierOut  # noqa: E402
from lit_models.builders import build_classifier  # noqa: E402
from lit_models.specs import ClassifierArgs  # noqa: E402
from lit_models.training.evaluation import EvaluationModule  # noqa: E402
from lit_models.training.optim import Optimisation, scheduled_adamw  # noqa: E402


class SentimentClassifier(EvaluationModule):
    """Sequence classifier with the encoder and the pooling as ablation axes.

    Args:
        src_vocab_size: input vocabulary size (linked from the datamodule by the CLI).
        num_classes: C; must equal the datamodule's ``num_classes`` (checked in ``setup``).
        options: the architecture (``specs.ClassifierArgs``: encoder, pooling, both encoders' arguments,
            attn_size, dropout), then the optimiser (``optim.Optimisation``: lr, lr_schedule, warmup_steps,
            weight_decay).
    """

    option_groups = (with_defaults(ClassifierArgs),
                     with_defaults(Optimisation, lr=3e-3, lr_schedule="constant", warmup_steps=0))
    figure_examples = 2  # token-importance figures of the first validation examples

    def __init__(self, *, src_vocab_size: int, num_classes: int = 2, **options: Any) -> None:
        groups = self.options(**options)
        arch, _ = groups
        super().__init__()
        self.save_hyperparameters()
        self.save_options(groups)
        self.net = build_classifier(arch.spec, vocab_size=src_vocab_size, num_classes=num_classes)
        self.metrics = nn.ModuleDict({split: nn.ModuleDict({
            "acc": MulticlassAccuracy(num_classes=num_classes, average="micro"),
            "f1": MulticlassF1Score(num_classes=num_classes, average="macro"),
            "loss": MeanMetric(),
            "confusion": MulticlassConfusionMatrix(num_classes=num_classes),
        }) for split in ("val", "test")})
        self.tokens_seen = 0

    def setup(self, stage: str) -> None:
        """Fail early, in one line, when the data's classes disagree with ``num_classes``."""
        dm = self.trainer.datamodule if self._trainer is not None else None
        n = getattr(dm, "num_classes", None)
        if n is not None and n != self.hparams.num_classes:
            raise UsageError(f"the data has {n} classes but --model.init_args.num_classes={self.hparams.num_classes}")

    def forward(self, tokens: Tensor) -> ClassifierOut:
        return self.net(tokens)

    def training_loss(self, batch: tuple[Tensor, Tensor], step: int) -> tuple[Tensor, dict[str, Tensor]]:
        """Cross-entropy of the batch and the logged loss and accuracy (pure: ``stacking`` vmaps it)."""
        tokens, labels = batch
        logits = self.net(tokens).logits
        loss = F.cross_entropy(logits.float(), labels)
        return loss, {"train/loss": loss, "train/acc": (logits.argmax(-1) == labels).float().mean()}

    def batch_tokens(self, batch: tuple[Tensor, Tensor]) -> int:
        """Non-PAD input tokens of a training batch (what ``tokens_seen`` counts)."""
        return int((batch[0] != PAD).sum())

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor | None:
        loss, logs = self.training_loss(batch, self.global_step)
        if (checked := self._checked(loss)) is not loss:
            return checked  # diverged
        self.tokens_seen += self.batch_tokens(batch)
        for name, value in logs.items():
            self.log(name, value, prog_bar=name == "train/loss", batch_size=batch[1].numel())
        return loss

    def _evaluate(self, batch: tuple[Tensor, Tensor], split: str) -> None:
        tokens, labels = batch
        logits = self.net(tokens).logits
        m = self.metrics[split]
        m["loss"].update(F.cross_entropy(logits.float(), labels), weight=labels.numel())
        preds = logits.argmax(-1)
        for name in ("acc", "f1", "confusion"):
            m[name].update(preds, labels)

    def _after_split(self, split: str, values: dict[str, Tensor]) -> None:
        """Rank 0 draws the split's confusion matrix (and, for val, the token-importance figures)."""
        if self.trainer.is_global_zero and not self.trainer.sanity_checking:
            self._figures(split, values[f"{split}/confusion"])

    def predict_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> list[str]:
        """Predicted class names (the datamodule's ``class_names``, else indices as text)."""
        preds = self.net(batch[0]).logits.argmax(-1).tolist()
        names = getattr(self.trainer.datamodule, "class_names", None) if self._trainer is not None else None
        return [names[p] if names else str(p) for p in preds]

    def configure_optimizers(self) -> dict:
        return scheduled_adamw(self)

    # ------------------------------------------------------------------ figures (rank 0 only)
    def _figures(self, split: str, confusion: Tensor) -> None:
        dm = self.trainer.datamodule
        names = list(getattr(dm, "class_names", [str(i) for i in range(self.hparams.num_classes)]))
        fig_dir = Path(self.trainer.default_root_dir) / "figures"
        fig_dir.mkdir(parents=True, exist_ok=True)
        fig = plot_confusion(confusion.cpu(), names, title=f"{split} confusion · epoch {self.current_epoch}")
        paths = {f"{split}/confusion": _save(fig, fig_dir / f"confusion_{split}.png")}
        if split == "val" and self.figure_batch is not None and hasattr(dm, "decode_tokens"):
            paths.update(self._importance_figures(fig_dir, names, dm))
        for logger in self.trainer.loggers:
            if isinstance(logger, WandbLogger):
                for key, path in paths.items():
                    logger.log_image(key=key, images=[str(path)], step=self.global_step)

    @torch.no_grad()
    def _importance_figures(self, fig_dir: Path, names: list[str], dm: L.LightningDataModule) -> dict[str, Path]:
        was_training = self.training
        self.eval()
        tokens, labels = self.figure_batch
        out = self.net(tokens.to(self.device))
        self.train(was_training)
        if out.weights is None:  # last / cls pooling: no per-token reading
            return {}
        paths = {}
        for i, ids in enumerate(tokens.tolist()):
            n = sum(t != PAD for t in ids)
            words = [dm.decode_tokens([t]) or "<unk>" for t in ids[:n]]
            pred = int(out.logits[i].argmax())
            title = (f"{self.hparams.pooling} pooling · gold {names[int(labels[i])]} · "
                     f"pred {names[pred]} · epoch {self.current_epoch}")
            fig = plot_token_importance(out.weights[i, :n].float().cpu(), words, title=title)
            paths[f"importance/ex{i}"] = _save(fig, fig_dir / f"importance_ex{i}.png")
        return paths


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def plot_confusion(confusion: Tensor, names: list[str], *, title: str) -> plt.Figure:
    """Row-normalised confusion matrix (rows = gold, colour scale [0, 1]) annotated with counts."""
    counts = confusion.float()
    rates = counts / counts.sum(1, keepdim=True).clamp_min(1)
    k = len(names)
    fig, ax = plt.subplots(figsize=(1.2 + 0.6 * k, 1.0 + 0.6 * k))
    image = ax.imshow(rates.numpy(), vmin=0.0, vmax=1.0, cmap="Blues")
    for r in range(k):
        for c in range(k):
            ax.text(c, r, f"{int(counts[r, c])}", ha="center", va="center", fontsize=7,
                    color="white" if rates[r, c] > 0.5 else "black")
    ax.set_xticks(range(k), names, rotation=45, fontsize=7)
    ax.set_yticks(range(k), names, fontsize=7)
    ax.set_xlabel("predicted", fontsize=7)
    ax.set_ylabel("gold", fontsize=7)
    ax.set_title(title, fontsize=8)
    fig.colorbar(image, ax=ax, shrink=0.7)
    fig.tight_layout()
    return fig


def plot_token_importance(weights: Tensor, words: list[str], *, title: str) -> plt.Figure:
    """One bar per input token: its pooling weight (y axis fixed to [0, 1], comparable across runs)."""
    fig, ax = plt.subplots(figsize=(max(4.0, 0.18 * len(words) + 1.0), 2.6))
    ax.bar(range(len(words)), weights.numpy(), color="tab:blue")
    ax.set_ylim(0.0, 1.0)
    ax.set_xticks(range(len(words)), words, rotation=90, fontsize=6)
    ax.set_ylabel("weight", fontsize=7)
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    return fig
