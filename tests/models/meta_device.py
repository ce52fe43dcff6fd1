"""A callback for tests: every training and evaluation batch (and each evaluation's end: probes, metrics) runs
with the default device set to ``meta``, so a tensor factory called without ``device=`` makes a meta tensor
that meets the batch's and the model's CPU tensors as a device mismatch (issue #43, item 8)."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch


def _meta(*_: Any) -> None:
    torch.set_default_device("meta")


def _cpu(*_: Any) -> None:
    torch.set_default_device(None)


class MetaDefault(L.Callback):
    """Default device ``meta`` from each batch's start (after the batch reached the model's device) to its end,
    and around the probes and metrics of each evaluation's end (this callback's epoch-end hooks run first)."""

    on_train_batch_start = on_validation_batch_start = on_test_batch_start = staticmethod(_meta)
    on_train_batch_end = on_validation_batch_end = on_test_batch_end = staticmethod(_cpu)
    on_validation_epoch_end = on_test_epoch_end = staticmethod(_meta)
    on_validation_end = on_test_end = on_exception = staticmethod(_cpu)

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        """Lightning's own logging makes its accumulators without a device, then moves them to the value's:
        it runs with the CPU default (it is Lightning's code, correct on a GPU)."""
        log = pl_module.log

        def on_cpu(name: str, value: Any, *args: Any, **kwargs: Any) -> None:
            if torch.is_tensor(value) and value.is_meta:
                raise RuntimeError(f"{name} was computed with a tensor made without device= (it is on meta)")
            with torch.device("cpu"):
                log(name, value, *args, **kwargs)

        pl_module.log = on_cpu
