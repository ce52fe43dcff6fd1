"""The opt-in TF32 switch (issue #43, item 9): ``MatmulPrecision`` holds torch's float32 matmul precision for
the run and restores it after; a wrong value is refused in one line."""

from __future__ import annotations

import lightning as L
import pytest
import torch
from lightning.pytorch.demos.boring_classes import BoringModel

from attnlab_run.matmul import MatmulPrecision


class Seen(L.Callback):
    def on_train_batch_start(self, *args) -> None:
        self.during = torch.get_float32_matmul_precision()


def test_precision_holds_during_the_run_and_is_restored() -> None:
    before, seen = torch.get_float32_matmul_precision(), Seen()
    trainer = L.Trainer(accelerator="cpu", max_steps=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                        callbacks=[MatmulPrecision("high"), seen])
    trainer.fit(BoringModel())
    assert seen.during == "high" and torch.get_float32_matmul_precision() == before == "highest"


def test_a_wrong_precision_is_refused() -> None:
    with pytest.raises(ValueError, match="highest, high or medium"):
        MatmulPrecision("tf32")
