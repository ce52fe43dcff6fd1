"""Sequence regression LightningModule for the adding problem (Hochreiter & Schmidhuber 1997).

The question it answers: can a cell carry two values across T steps? LSTM's constant error
carousel should solve T=100 (test MSE < 0.01) while a plain RNN stays near the mean predictor
(MSE ≈ 1/6 for two U(0, 1) values).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchmetrics import MeanMetric

from attnlab_core.batches import RegressionBatch
from lit_models.axes import Cell
from lit_models.blocks.recurrent import SequenceRegressor
from lit_models.registries import CELLS
from lit_models.training.evaluation import EvaluationModule
from lit_models.training.optim import module_adamw


class AddingRegressor(EvaluationModule):
    """A recurrent encoder with a linear read-out of its last hidden state, trained with MSE.

    Args:
        cell: recurrent cell (rnn | gru | lstm | lstm_peephole).
        input_size: channels per step (2 for the adding problem).
        hidden_size: hidden units.
        num_layers: stacked layers.
        lr: Adam learning rate.
    """

    def __init__(
        self, *, cell: Cell = "lstm", input_size: int = 2, hidden_size: int = 64, num_layers: int = 1, lr: float = 3e-3
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = SequenceRegressor(cell=CELLS[cell], input_size=input_size, hidden_size=hidden_size,
                                     num_layers=num_layers)
        self.metrics = nn.ModuleDict({split: nn.ModuleDict({"mse": MeanMetric(), "loss": MeanMetric()})
                                      for split in ("val", "test")})
        self.tokens_seen = 0

    def training_step(self, batch: RegressionBatch, batch_idx: int) -> Tensor | None:
        loss = F.mse_loss(self.net(batch.x), batch.y)
        if (checked := self._checked(loss)) is not loss:
            return checked  # diverged
        self.tokens_seen += batch.x.shape[0] * batch.x.shape[1]
        self.log("train/loss", loss, prog_bar=True, batch_size=batch.y.numel())
        return loss

    def _evaluate(self, batch: RegressionBatch, split: str) -> None:
        """Example-weighted mean squared error, summed over DDP ranks at ``compute()``."""
        mse = F.mse_loss(self.net(batch.x), batch.y)
        for name in ("mse", "loss"):
            self.metrics[split][name].update(mse.detach(), weight=batch.y.numel())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return module_adamw(self, lr=self.hparams.lr, weight_decay=0.0)  # AdamW without decay is Adam
