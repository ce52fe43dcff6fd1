"""The gradient probe reads unscaled gradients under ``16-mixed`` (issue #43, item 5).

Under ``16-mixed`` Lightning's GradScaler multiplies the loss by its scale (2**16 at the start) before
backward. It unscales the gradients after the closure, before ``on_before_optimizer_step``, only where the
optimizer does not do it inside its own step; the project's fused AdamW does (Lightning then never calls
``unscale_``), and so the gradients stay scaled until the optimizer step. The probe must log the unscaled
norm either way. The reference is independent: the fp32 gradient norm of the same initial weights on the
same single batch (its examples in another order; the loss is a mean). fp16 autocast moves the norm by
about 1e-3 relative; the tolerance is 5e-2, while a read of scaled gradients is 2**16 times too large.
Lightning's own ``MixedPrecision`` plugin with ``torch.amp.GradScaler("cpu")`` (Lightning turns ``16-mixed``
into ``bf16-mixed`` on CPU unless given the plugin) takes the path a CUDA run takes.
"""

from __future__ import annotations

import copy

import lightning as L
import pytest
import torch
from lightning.pytorch.plugins import MixedPrecision

from datamodules.synthetic import SyntheticSeq2Seq
from lit_models.callbacks.grad_probes import GradientNorms, layer_grad_norms
from lit_models.families.seq2seq import TransformerSeq2Seq


class Logged(L.Callback):
    """What the probe logged at each step (``callback_metrics`` holds the step's value)."""

    def __init__(self) -> None:
        self.totals: list[float] = []

    def on_train_batch_end(self, trainer: L.Trainer, *args) -> None:
        self.totals.append(float(trainer.callback_metrics["train/grad_norm/total"]))


def fp32_norm(model: TransformerSeq2Seq, dm: SyntheticSeq2Seq) -> float:
    model = copy.deepcopy(model)
    dm.setup("fit")
    (batch,) = list(dm.train_dataloader())
    model.training_loss(batch, 0)[0].backward()
    return layer_grad_norms(model)["total"]


@pytest.mark.parametrize("clip", [0.0, 1.0], ids=["fused AdamW (unscales in its step)", "foreach (Lightning unscales)"])
def test_gradient_probe_reads_unscaled_gradients_under_16_mixed(clip: float) -> None:
    torch.manual_seed(0)
    dm = SyntheticSeq2Seq(vocab_size=10, min_len=2, max_len=5, train_size=8, val_size=4, test_size=4, batch_size=8)
    model = TransformerSeq2Seq(src_vocab_size=dm.src_vocab_size, tgt_vocab_size=dm.tgt_vocab_size, d_model=16,
                               heads=2, d_ff=32, encoder_layers=1, decoder_layers=1, dropout=0.0)
    reference, logged = fp32_norm(model, dm), Logged()
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=1, plugins=[MixedPrecision("16-mixed", "cpu", scaler)],
                        gradient_clip_val=clip, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, limit_val_batches=0, callbacks=[GradientNorms(steps=10), logged])
    trainer.fit(model, dm)
    assert logged.totals[0] == pytest.approx(reference, rel=5e-2), "the probe read the scaled gradients"
