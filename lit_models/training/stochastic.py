"""The base of every attnlab LightningModule: per-rank randomness (scheduled-sampling coins, hard attention,
glimpse locations), divergence as a recorded outcome, per-step logs made only on the steps whose values
something reads.
"""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from torch import Tensor, nn

from lit_models.training.steplogs import is_read


class StochasticModule(L.LightningModule):
    """Base class of modules that draw random decisions in the main process.

    - ``seed_everything`` gives every DDP rank the same global seed, so REINFORCE samples would be
      identical (correlated) across ranks; :meth:`on_fit_start` offsets torch's seed by the rank
      (pitfalls §3.3).
    - RNG states are saved in checkpoints and restored on resume by the CLI's
      :class:`attnlab_run.faults.RngState` callback (every family, not only these).
    - A non-finite loss ends the run through :meth:`_checked` (on every DDP rank at once); ``RunSummary``
      records it as status ``diverged`` with ``diverged_at`` (the step).
    - ``self.log`` of a per-step training value is skipped on the steps Lightning does not hand to the
      loggers and after which nothing reads ``callback_metrics`` (``lit_models.training.steplogs``): every reader gets
      the values it got before, at a third of a millisecond less a skipped call.
    """

    def __init__(self) -> None:
        super().__init__()
        self.diverged_at: int | None = None

    def on_fit_start(self) -> None:
        """Offset the global RNG per DDP rank so sampled decisions differ between ranks."""
        if self.trainer.world_size > 1:
            torch.manual_seed(torch.initial_seed() + self.global_rank)

    def configure_model(self) -> None:
        """Under multi-device DDP on an accelerator, BatchNorm layers that train (the captioner's ``small_cnn``)
        become ``SyncBatchNorm``: each normalises with the statistics of the global batch, as a one-device run
        of the same global batch does, instead of its rank's share (a quarter of a 4-GPU batch). CPU (gloo)
        DDP keeps per-rank statistics: torch's SyncBatchNorm runs on accelerators only. Checkpoints keep
        their keys (a SyncBatchNorm's state is a BatchNorm's)."""
        if self._trainer is None:  # load_from_checkpoint configures too: no launch, nothing to synchronise
            return
        strategy = self.trainer.strategy
        if self.trainer.world_size > 1 and strategy.root_device.type != "cpu" and _training_batchnorm(self):
            nn.SyncBatchNorm.convert_sync_batchnorm(self)

    def log(self, name: str, value: Any, *args: Any, **kwargs: Any) -> None:
        """``LightningModule.log``, skipped where nothing would read the value (``steplogs.is_read``)."""
        if is_read(self, args, kwargs):
            super().log(name, value, *args, **kwargs)

    def _checked(self, total: Tensor) -> Tensor | None:
        """``total`` while the loss is finite on every rank; else the run diverged, on every rank at once.

        One process: None (Lightning skips the backward and the optimizer step). Under DDP the ranks first
        agree (one all-reduce of a flag: a rank whose loss alone is non-finite must not leave the others in
        the gradient all-reduce, and Lightning refuses a DDP ``training_step`` that returns None), then each
        returns a zero objective that still reaches every trainable parameter, so the backward's all-reduce
        completes; :meth:`on_before_optimizer_step` then drops those zero gradients, so no rank updates.
        """
        finite = bool(torch.isfinite(total.detach()))
        distributed = self._trainer is not None and self.trainer.world_size > 1
        if distributed:
            finite = self.trainer.strategy.reduce_boolean_decision(finite, all=True)
        if finite:
            return total
        self.diverged_at = int(self.global_step)
        self.trainer.should_stop = True
        if not distributed:
            return None
        return sum((p.sum() * 0.0 for p in self.parameters() if p.requires_grad), total.new_zeros(()))

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        """The step that diverged updates nothing (its zero gradients under DDP are dropped)."""
        if self.diverged_at is not None:
            optimizer.zero_grad(set_to_none=True)


def _training_batchnorm(module: nn.Module) -> bool:
    """Whether ``module`` holds a (not yet synchronised) BatchNorm layer with trainable parameters."""
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) and not isinstance(m, nn.SyncBatchNorm)
               and any(p.requires_grad for p in m.parameters()) for m in module.modules())
