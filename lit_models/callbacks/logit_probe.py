"""``MaxLogit``: the largest attention logit over training, the signal of attention-logit growth.

Wortsman et al. 2023 ("Small-scale proxies for large-scale Transformer training instabilities", §3.1) show
that at a high learning rate the attention logits grow until the softmax is one-hot and the loss diverges,
and that QK-layernorm (Dehghani et al. 2023) removes it; their figure plots the maximum attention logit
against the step. This probe logs that maximum, ``train/max_logit``: over every attention module of the
network, every head, query and allowed key of the training batch (scaled logits, score biases included).

It runs only on the steps Lightning flushes to the loggers (``log_every_n_steps``): there it sets each
``MultiHeadAttention.logit_tap`` before the training step, and logs the maximum of the taps' device tensors
after it (one extra q·kᵀ per attention on those steps, no host sync on the others). Its companion, the
attention entropy, is ``probes.AttentionEntropy`` (``val/attn_entropy/<map>`` at every validation).
"""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from torch import Tensor

from lit_models.blocks.attention import MultiHeadAttention
from lit_models.training.steplogs import is_flush_step


class MaxLogit(L.Callback):
    """``train/max_logit``: the largest attention logit of the training batch, on logging steps only (rank zero).

    The tap is one callable made once, and the tapped modules are collected once per fit: a compiled model guards
    on ``logit_tap``, so a fresh callable on every logging step would recompile the attention each time (and,
    after dynamo's recompile limit, leave it eager for the rest of the run).
    """

    KEY = "train/max_logit"

    def __init__(self) -> None:
        self.seen: list[Tensor] = []
        self._tap = self.seen.append
        self.tapped: list[MultiHeadAttention] = []

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.tapped = [m for m in pl_module.modules() if isinstance(m, MultiHeadAttention)]

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        if not trainer.is_global_zero or not is_flush_step(trainer):
            return
        self.seen.clear()
        for module in self.tapped:
            module.logit_tap = self._tap

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        for module in self.tapped:
            module.logit_tap = None
        if self.seen:
            pl_module.log(self.KEY, torch.stack(self.seen).max(), on_step=True, on_epoch=False, rank_zero_only=True)
        self.seen.clear()
