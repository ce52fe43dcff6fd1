"""Opt-in TF32 matmuls on GPUs, as a Lightning callback (no code or config change)::

    attnlab fit ... --trainer.callbacks+=attnlab_run.matmul.MatmulPrecision            # "high": TF32
    attnlab fit ... --trainer.callbacks+=attnlab_run.matmul.MatmulPrecision \\
        --trainer.callbacks.init_args.precision=medium                                    # bf16 passes

``torch.set_float32_matmul_precision`` for the run's duration (restored at its end): on Ampere and later
GPUs, "high" runs float32 matmuls and convolutions on TF32 tensor cores (10 mantissa bits in the products,
float32 accumulation), several times faster than strict float32. Off by default: the findings were
recorded in strict float32, and a run that turns it on is a different numerical setup (its ``config.yaml``
names the callback). CPUs ignore it (CPU matmuls stay float32 at every setting but "medium" on bf16 CPUs).
"""

from __future__ import annotations

from typing import Literal

import lightning as L
import torch

Precision = Literal["highest", "high", "medium"]


class MatmulPrecision(L.Callback):
    """Set ``torch.set_float32_matmul_precision(precision)`` from setup to teardown.

    Args:
        precision: "highest" (strict float32, torch's default), "high" (TF32 where supported) or "medium".
    """

    def __init__(self, precision: Precision = "high") -> None:
        if precision not in ("highest", "high", "medium"):
            raise ValueError(f"precision must be highest, high or medium, got {precision!r}")
        self.precision = precision
        self.saved: str | None = None

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self.saved = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision(self.precision)

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self.saved is not None:
            torch.set_float32_matmul_precision(self.saved)
            self.saved = None
