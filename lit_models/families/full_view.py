"""Full-view baseline for the recurrent attention model's digits (Mnih et al. 2014, §4.1 and Table 1).

The question it answers: how well does a network that sees the whole canvas at once classify the digit that
RAM finds with a few glimpses? Table 1 (60×60 translated MNIST) compares RAM with fully connected networks
("FC, 2 layers (64 hiddens each)", "FC, 2 layers (256 hiddens each)") and a 2-layer convolutional
network; this module is the FC row: the canvas flattened -> ``layers`` ReLU layers of ``hidden_size``
units -> class logits (``blocks.full_view_net``, wired by ``builders.build_full_view``), trained with
cross-entropy. Validation and test log ``val/acc`` and ``val/loss`` (cross-entropy) and ``test/*``, the
keys RAM logs (RAM also logs ``glimpses_on_digit``, which a full view has no use for).

Deviations: AdamW (the paper does not give the baselines' optimiser); no convolutional row (the paper's
"Convolutional, 2 layers" is not built here). ``ablations/configs/ram_mnist_fc.yaml`` sizes the hidden
layers so the network has as many parameters as ``ram_mnist.yaml``'s RAM (see that file).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchmetrics import MeanMetric
from torchmetrics.classification import MulticlassAccuracy

from attnlab_core.batches import DigitBatch
from attnlab_core.options import with_defaults
from lit_models.builders import build_full_view
from lit_models.specs import FullViewSpec
from lit_models.training.evaluation import EvaluationModule
from lit_models.training.optim import CONSTANT_LR, module_adamw
from lit_models.validation import check_data_matches


class FullViewClassifier(EvaluationModule):
    """A multilayer perceptron over the whole canvas, trained with cross-entropy (Mnih et al. 2014's FC baseline).

    Args:
        num_classes: classes (10 digits).
        options: the architecture (``specs.FullViewSpec``: in_channels, canvas_size, hidden_size, layers),
            then the optimiser's ``lr`` and ``weight_decay`` (``optim.Optimisation``, a constant rate, as RAM's).
    """

    option_groups = (with_defaults(FullViewSpec), CONSTANT_LR)

    def __init__(self, *, num_classes: int = 10, **options: Any) -> None:
        groups = self.options(**options)
        spec, _ = groups
        super().__init__()
        self.save_hyperparameters()
        self.save_options(groups)
        self.net = build_full_view(spec, num_classes=num_classes)
        self.metrics = nn.ModuleDict({split: nn.ModuleDict({
            "acc": MulticlassAccuracy(num_classes=num_classes, average="micro"),
            "loss": MeanMetric(),
        }) for split in ("val", "test")})
        self.tokens_seen = 0  # images seen (the run summary's throughput counter)

    def setup(self, stage: str) -> None:
        """Fail early, in one line, when the data disagrees with ``num_classes`` / ``in_channels`` / ``canvas_size``."""
        check_data_matches(self, ("num_classes", "in_channels", "canvas_size"))

    def forward(self, images: Tensor) -> Tensor:
        return self.net(images)

    def training_step(self, batch: DigitBatch, batch_idx: int) -> Tensor | None:
        loss = F.cross_entropy(self.net(batch.images).float(), batch.labels)
        if (checked := self._checked(loss)) is not loss:
            return checked  # diverged
        n = batch.labels.numel()
        self.tokens_seen += n
        self.log("train/loss", loss, prog_bar=True, batch_size=n)
        return loss

    def _evaluate(self, batch: DigitBatch, split: str) -> None:
        logits = self.net(batch.images)
        m = self.metrics[split]
        m["loss"].update(F.cross_entropy(logits.float(), batch.labels), weight=batch.labels.numel())
        m["acc"].update(logits.argmax(-1), batch.labels)

    def predict_step(self, batch: DigitBatch, batch_idx: int) -> list[int]:
        return self.net(batch.images).argmax(-1).tolist()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return module_adamw(self, lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)
