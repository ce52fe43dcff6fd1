"""What every LightningModule that samples during training shares: per-rank randomness, RNG state
in checkpoints, and divergence as a recorded outcome.

Used by the seq2seq families (scheduled-sampling coins, hard attention) and RAM (glimpse locations).
"""

from __future__ import annotations

import lightning as L
import torch


class StochasticModule(L.LightningModule):
    """Base class of modules that draw random decisions in the main process.

    - ``seed_everything`` gives every DDP rank the same global seed, so REINFORCE samples would be
      identical (correlated) across ranks; :meth:`on_fit_start` offsets torch's seed by the rank
      (pitfalls §3.3).
    - Lightning checkpoints do not store RNG states; torch's is saved and restored here so a
      resumed run draws the same stream.
    - A non-finite loss ends the run through :meth:`_diverge`; ``RunSummary`` records it as
      status ``diverged`` with ``diverged_at`` (the step).
    """

    def __init__(self) -> None:
        super().__init__()
        self.diverged_at: int | None = None

    def on_fit_start(self) -> None:
        """Offset the global RNG per DDP rank so sampled decisions differ between ranks."""
        if self.trainer.world_size > 1:
            torch.manual_seed(torch.initial_seed() + self.global_rank)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """Lightning does not save RNG states; keep torch's so a resumed run draws the same stream."""
        checkpoint["torch_rng_state"] = torch.get_rng_state()

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        if "torch_rng_state" in checkpoint:
            torch.set_rng_state(checkpoint["torch_rng_state"])

    def _diverge(self) -> None:
        """A non-finite loss ends the run as a recorded outcome (summary status 'diverged')."""
        self.diverged_at = int(self.global_step)
        self.trainer.should_stop = True
        return None
