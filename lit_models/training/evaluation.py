"""Validation/test plumbing shared by every LightningModule: one place for the epoch loop of metrics.

Each family declares per-split torchmetrics in ``self.metrics`` (``{"val": ModuleDict, "test": ModuleDict}``)
and implements ``_evaluate(batch, split)`` (update them). This base keeps the head of the first
validation batch as ``figure_batch`` (what the figure callback draws), and at each epoch end
computes every metric (a collective across DDP ranks), logs it as ``<split>/<name>`` — dict-valued
metrics as ``<split>/<name>/<key>`` — and resets it. The eval sampler gives every example to exactly
one rank, and metric states are summed at ``compute()``, so every example counts once.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from attnlab_core.options import TakesOptions
from lit_models.training.stochastic import StochasticModule


def batch_head(batch: Any, n: int) -> Any:
    """The first ``n`` examples of a batch (a NamedTuple/tuple of tensors or lists), on the CPU."""
    def head(field: Any) -> Any:
        return field[:n].cpu() if isinstance(field, Tensor) else field[:n]

    return type(batch)(*(head(f) for f in batch))


class EvaluationModule(TakesOptions, StochasticModule):
    """Base of every family: ``validation_step``/``test_step`` and their epoch ends.

    Subclasses set ``self.net`` (their network, from ``builders``; the probes read it) and implement
    ``_evaluate(batch, split)``; they may override ``_split_values`` (e.g. to drop NaN entries) and
    ``_after_split(split, values)`` (e.g. a confusion-matrix figure). A family's arguments beyond its
    data-given sizes are its ``option_groups`` (``attnlab_core.options.TakesOptions``).
    """

    net: torch.nn.Module
    figure_examples = 0  # families that draw figures set how many validation examples they keep

    def __init__(self) -> None:
        super().__init__()
        self.figure_batch: Any = None

    def _evaluate(self, batch: Any, split: str) -> None:
        raise NotImplementedError

    def _figure_head(self, batch: Any) -> Any:
        """The examples of the first validation batch that the figures draw (default: the first ones)."""
        return batch_head(batch, self.figure_examples)

    def _split_values(self, split: str) -> dict[str, Tensor]:
        """Compute, flatten and reset every metric of ``split``."""
        flat: dict[str, Tensor] = {}
        for name, metric in self.metrics[split].items():
            value = metric.compute()
            items = value.items() if isinstance(value, dict) else [("", value)]
            flat.update({f"{split}/{name}" + (f"/{k}" if k else ""): v for k, v in items})
            metric.reset()
        return flat

    def _after_split(self, split: str, values: dict[str, Tensor]) -> None:
        """Hook after a split's metrics were logged (rank-independent; guard rank-0 work yourself)."""

    def _log_metrics(self, split: str) -> None:
        values = self._split_values(split)
        self.log_dict({k: v for k, v in values.items() if v.dim() == 0}, prog_bar=split == "val")
        self._after_split(split, values)

    def on_validation_epoch_start(self) -> None:
        float32_metrics(self)

    def on_test_epoch_start(self) -> None:
        float32_metrics(self)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        if self.figure_batch is None and batch_idx == 0 and self.figure_examples > 0:
            self.figure_batch = self._figure_head(batch)
        self._evaluate(batch, "val")

    def on_validation_epoch_end(self) -> None:
        self._log_metrics("val")

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self._evaluate(batch, "test")

    def on_test_epoch_end(self) -> None:
        self._log_metrics("test")


def float32_metrics(module: torch.nn.Module) -> None:
    """Keep metric states float32 under ``--trainer.precision bf16-true`` / ``16-true``: Lightning converts
    the whole module with ``.to(dtype)``, which torchmetrics' dtype guard does not catch, and a bf16
    counter is exact only up to 256."""
    half = (torch.bfloat16, torch.float16)
    for m in module.modules():
        if isinstance(m, Metric) and any(isinstance(v, Tensor) and v.dtype in half for v in m.metric_state.values()):
            m.set_dtype(torch.float32)


def drop_nan(values: dict[str, Tensor]) -> dict[str, Tensor]:
    """Scalars that are defined (a metric with no examples, e.g. localisation without boxed words, is NaN)."""
    return {k: v for k, v in values.items() if not (v.dim() == 0 and bool(torch.isnan(v)))}
