"""The adding problem (Hochreiter & Schmidhuber 1997; setup of Le, Jaitly & Hinton 2015, "IRNN").

Each input is a (T, 2) sequence: channel 0 holds values drawn from U(0, 1), channel 1 is a marker
that is 1 at exactly two positions, one in the first half (``[0, T//2)``) and one in the second half
(``[T//2, T)``). The target is the sum of the two marked values. Predicting the mean (1.0) gives
MSE = Var(U1 + U2) = 1/6 ~ 0.167, the baseline a model must beat.

Deviation from Hochreiter & Schmidhuber: their values lie in [-1, 1] and the first marker is placed
among the first ten steps; here (as in Le et al.) values lie in [0, 1] and the markers split by halves.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from attnlab_core.errors import UsageError
from datamodules.batching import DrawnSplits, collate_regression
from datamodules.splits import Split, split_generator


def generate_adding(*, n: int, seq_len: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw ``n`` adding-problem examples.

    Args:
        n: number of examples.
        seq_len: T, sequence length (>= 2).
        generator: source of randomness (consumed).

    Returns:
        x: (n, T, 2) float, channel 0 values in [0, 1), channel 1 the two markers.
        y: (n,) float, the sum of the two marked values.
    """
    half = seq_len // 2
    values = torch.rand(n, seq_len, generator=generator)  # (n, T)
    first = torch.randint(0, half, (n,), generator=generator)  # (n,)
    second = torch.randint(half, seq_len, (n,), generator=generator)  # (n,)
    rows = torch.arange(n)
    markers = torch.zeros(n, seq_len)  # (n, T)
    markers[rows, first] = 1.0
    markers[rows, second] = 1.0
    x = torch.stack([values, markers], dim=-1)  # (n, T, 2)
    y = values[rows, first] + values[rows, second]  # (n,)
    return x, y


class AddingProblem(DrawnSplits):
    """Long-range regression benchmark for recurrent and attentive encoders.

    Batches are :class:`datamodules.batching.RegressionBatch` (x (B, T, 2), y (B,)). Data is generated
    per split from a generator seeded by ``(seed, split)``: identical across runs and DDP ranks.
    Loader sharding under DDP as in :func:`datamodules.batching.build_dataloader`. Le et al. train on
    100,000 sequences and test on 10,000 (the default sizes).

    Args:
        seq_len: T, the sequence length (Le et al. use 150, 200, 300, 400).
    """

    split_defaults = {"train_size": 100_000, "val_size": 1_000, "test_size": 10_000}

    def __init__(
        self,
        *,
        seq_len: int = 100,
        **split: Any,
    ) -> None:
        super().__init__(split=self.split_spec(**split))
        if seq_len < 2:
            raise UsageError(f"seq_len must be >= 2 (one marker per half), got {seq_len}")
        self.seq_len = seq_len
        self.save_hyperparameters()

    @property
    def input_size(self) -> int:
        """Channels per time step (value, marker) = 2."""
        return 2

    def draw(self, split: Split) -> TensorDataset:
        """Split ``split`` as a TensorDataset of (x (T, 2), y ())."""
        x, y = generate_adding(n=self.sizes[split], seq_len=self.seq_len, generator=split_generator(self.seed, split))
        return TensorDataset(x, y)

    def _loader(self, name: Split) -> DataLoader:
        return self.loader(self.split(name), name, collate_fn=collate_regression)
