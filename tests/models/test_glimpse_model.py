"""RAM LightningModule: overfit one batch, trajectory figures, divergence as an outcome,
checkpoints (primitive hparams, RNG state), per-rank seeding."""

import json
from pathlib import Path
from types import SimpleNamespace

import lightning as L
import pytest
import torch
import torch.nn.functional as F

from attnlab_run.recording import RunSummary
from datamodules.digits import TranslatedDigits
from lit_models.callbacks.figures import AttentionFigures
from lit_models.families.glimpse import RecurrentAttentionModel, hybrid_loss, on_digit

SMALL = {"glimpses": 4, "patch_size": 8, "scales": 3, "glimpse_hidden": 32, "location_hidden": 16,
         "glimpse_size": 64, "hidden_size": 64, "std": 0.15}


def _data(**kw) -> TranslatedDigits:
    args = {"train_size": 64, "val_size": 16, "test_size": 16, "batch_size": 16, "seed": 0, **kw}
    return TranslatedDigits(**args)


def _trainer(tmp_path: Path, callbacks: list, **kw) -> L.Trainer:
    args = {"max_epochs": 1, "limit_train_batches": 2, "logger": False, "enable_checkpointing": False,
            "enable_progress_bar": False, "enable_model_summary": False, "accelerator": "cpu",
            "default_root_dir": str(tmp_path), "num_sanity_val_steps": 0, **kw}
    return L.Trainer(callbacks=callbacks, **args)


def test_overfits_one_batch():
    """16 images, 1000 Adam steps with the learning rate decayed linearly to 0, so the sampled glimpse
    policy settles instead of still moving at the last step. Measured on an AMX Xeon, seeds 0-3:
    16/16 right, cross-entropy 0.013-0.113 (with 500 constant-lr steps seed 0 stopped at 15/16)."""
    torch.manual_seed(0)
    dm = _data(train_size=16)
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    model = RecurrentAttentionModel(**SMALL, lr=3e-3)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    steps = 1000
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1 - s / steps)
    for _ in range(steps):
        opt.zero_grad()
        loss = hybrid_loss(model.net(batch.images, sample=True), batch.labels, reinforce_weight=1.0)
        loss.total.backward()
        opt.step()
        schedule.step()
    with torch.no_grad():
        logits = model.net(batch.images, sample=False).logits
    right, ce = int((logits.argmax(-1) == batch.labels).sum()), float(F.cross_entropy(logits, batch.labels))
    assert right >= 15 and ce < 0.3, f"{right}/16 right, cross-entropy {ce:.3f} (chance: 1.6/16, ln 10 = 2.30)"


def _count_drawings(monkeypatch, record) -> list:
    """Every ``AttentionFigures._draw`` call, as ``record(trainer, pl_module, epoch)``, in order."""
    drawn = []
    original = AttentionFigures._draw

    def counting(self, trainer, pl_module, epoch):
        drawn.append(record(trainer, pl_module, epoch))
        original(self, trainer, pl_module, epoch)

    monkeypatch.setattr(AttentionFigures, "_draw", counting)
    return drawn


def test_figures_without_wandb_are_drawn_once_at_the_end_of_fit(tmp_path, monkeypatch):
    """Without W&B only the last drawing of a fit is read (each overwrites figures/): 3 validations, 1
    drawing, at the end of fit and in eval mode; ``validate`` draws at once."""
    drawn = _count_drawings(monkeypatch, lambda trainer, module, epoch: (trainer.state.stage, module.training, epoch))
    torch.manual_seed(0)
    model = RecurrentAttentionModel(**SMALL)
    trainer = _trainer(tmp_path, [AttentionFigures(run_dir=tmp_path)], max_epochs=3)
    trainer.fit(model, datamodule=_data())
    assert drawn == [("train", False, 2)], drawn  # once, in eval mode, for the last epoch
    assert len(list((tmp_path / "figures").glob("glimpses_ex*.png"))) == 4
    trainer.validate(model, datamodule=_data())
    assert len(drawn) == 2 and drawn[1][0] == "validate", drawn


def test_figures_with_wandb_are_spread_over_training(tmp_path, monkeypatch):
    """With W&B each drawing is kept, but only at the first validation past each of ``max_drawings`` evenly
    spaced steps: 6 validations over 12 steps, max_drawings 3 -> steps 4, 8, 12 (epochs 1, 3, 5), the last
    in that validation (none owed at the end of fit)."""
    from lightning.pytorch.loggers import WandbLogger

    monkeypatch.setenv("WANDB_MODE", "offline")
    drawn = _count_drawings(monkeypatch, lambda trainer, _, epoch: (trainer.state.stage, trainer.global_step, epoch))
    torch.manual_seed(0)
    logger = WandbLogger(save_dir=str(tmp_path), offline=True, project="t")
    trainer = _trainer(tmp_path, [AttentionFigures(run_dir=tmp_path, max_drawings=3)], max_epochs=6, logger=logger)
    trainer.fit(RecurrentAttentionModel(**SMALL), datamodule=_data())
    logger.experiment.finish()
    assert drawn == [("validate", 4, 1), ("validate", 8, 3), ("validate", 12, 5)], drawn
    with pytest.raises(ValueError, match="max_drawings"):
        AttentionFigures(run_dir=tmp_path, max_drawings=0)


def test_fit_writes_trajectory_figures_and_metrics(tmp_path):
    torch.manual_seed(0)
    model = RecurrentAttentionModel(**SMALL)
    trainer = _trainer(tmp_path, [AttentionFigures(run_dir=tmp_path)])
    trainer.fit(model, datamodule=_data())
    paths = sorted((tmp_path / "figures").glob("glimpses_ex*.png"))
    assert [p.name for p in paths] == [f"glimpses_ex{i}.png" for i in range(4)]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and paths[0].stat().st_size > 5_000
    assert {"val/acc", "val/loss", "val/glimpses_on_digit"} <= set(trainer.callback_metrics)
    dm = _data()
    trainer.test(model, datamodule=dm)
    model.eval()
    with torch.no_grad():  # test/acc is the share of right argmax predictions over all 16 test images
        right = sum(int((model.net(b.images, sample=False).logits.argmax(-1) == b.labels).sum())
                    for b in dm.test_dataloader())
    assert float(trainer.callback_metrics["test/acc"]) == pytest.approx(right / 16), right


def test_non_finite_loss_is_a_recorded_divergence(tmp_path):
    class NaNImages(TranslatedDigits):
        def split(self, name):
            data = super().split(name)
            data.canvases = data.canvases.float().fill_(float("nan"))  # collate divides by 255: NaN images
            return data

    model = RecurrentAttentionModel(**SMALL)
    summary = RunSummary(run_dir=tmp_path, seed=0, subcommand="fit")
    trainer = _trainer(tmp_path, [summary], max_epochs=3, limit_train_batches=4, limit_val_batches=0)
    trainer.fit(model, datamodule=NaNImages(train_size=64, val_size=16, test_size=16, batch_size=16))
    assert model.diverged_at == 0 and trainer.should_stop and trainer.current_epoch <= 1
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["status"] == "diverged" and written["diverged_at"] == 0


def test_checkpoint_has_primitive_hparams_and_reloads(tmp_path):
    model = RecurrentAttentionModel(**SMALL, cell="gru")
    trainer = _trainer(tmp_path, [], limit_val_batches=1)
    trainer.fit(model, datamodule=_data())
    path = tmp_path / "model.ckpt"
    trainer.save_checkpoint(path)
    ckpt = torch.load(path, weights_only=True)
    assert ckpt["hyper_parameters"]["cell"] == "gru" and ckpt["hyper_parameters"]["glimpses"] == 4
    assert all(isinstance(v, (int, float, str, bool)) for v in ckpt["hyper_parameters"].values())
    reloaded = RecurrentAttentionModel.load_from_checkpoint(path, weights_only=True)
    images = torch.rand(2, 1, 60, 60)
    torch.testing.assert_close(reloaded.net(images, sample=False).logits, model.net(images, sample=False).logits)


def test_rng_is_offset_per_rank_on_fit_start():
    model = RecurrentAttentionModel(**SMALL)
    model._trainer = SimpleNamespace(world_size=2, global_rank=1)
    torch.manual_seed(7)
    model.on_fit_start()
    assert torch.initial_seed() == 8


def test_on_digit_reads_x_then_y_and_excludes_the_far_edge():
    boxes = torch.tensor([[0, 30, 28, 58]])  # x0, y0, x1, y1 on a 60x60 canvas: bottom-left
    pixels = torch.tensor([[[10.0, 40.0], [40.0, 10.0], [28.0, 40.0], [0.0, 30.0]]])  # (x, y) in pixels
    hits = on_digit(pixels / 30 - 1, boxes, height=60, width=60)
    assert hits.tolist() == [[True, False, False, True]]
