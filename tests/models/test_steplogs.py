"""Per-step logs skipped on the steps no logger reads (``lit_models.training.steplogs``): the loggers and the progress
bar receive exactly what they received when every step logged."""

from __future__ import annotations

from typing import Any

import lightning as L
import pytest
from lightning.pytorch.loggers.logger import Logger

import lit_models.training.steplogs as steplogs
from datamodules.synthetic import SyntheticSeq2Seq
from lit_models.callbacks.grad_probes import GradientNorms
from lit_models.families.recurrent_seq2seq import RecurrentSeq2Seq


class Received(Logger):
    """Every ``log_metrics`` call a logger gets: (step, metrics)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[int | None, dict[str, float]]] = []

    @property
    def name(self) -> str:
        return "received"

    @property
    def version(self) -> str:
        return "0"

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        pass

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        self.calls.append((step, dict(metrics)))


class Bar(L.Callback):
    """The progress bar's metrics after every training batch, and ``callback_metrics`` where the run's summary,
    checkpoint and early-stopping monitors read them: after each validation and when the fit ends."""

    def __init__(self) -> None:
        self.seen: list[dict[str, float]] = []
        self.read: list[dict[str, float]] = []

    def on_train_batch_end(self, trainer: L.Trainer, *_: Any) -> None:
        self.seen.append({k: float(v) for k, v in trainer.progress_bar_metrics.items()})

    def on_validation_end(self, trainer: L.Trainer, *_: Any) -> None:
        self.read.append({k: float(v) for k, v in trainer.callback_metrics.items()})

    def on_train_epoch_end(self, trainer: L.Trainer, *_: Any) -> None:
        self.on_validation_end(trainer)

    def on_fit_end(self, trainer: L.Trainer, *_: Any) -> None:
        self.on_validation_end(trainer)


def fit(every: int) -> tuple[Received, Bar, int]:
    """17 steps of a hard-attention GRU (three values logged a step) with the gradient probe (a callback, left
    as it was) on its first 9 steps, whose last values Lightning re-sends at the epoch's later flushes."""
    L.seed_everything(3)
    data = SyntheticSeq2Seq(task="reverse", vocab_size=12, min_len=3, max_len=6, train_size=96, val_size=32,
                            test_size=16, batch_size=8, max_tokens=None)
    model = RecurrentSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, cell="gru", attention="hard", embed_dim=8,
                             hidden_size=8, bidirectional=False, dropout=0.0)
    logger, bar = Received(), Bar()
    trainer = L.Trainer(max_steps=17, log_every_n_steps=every, val_check_interval=6, limit_val_batches=1,
                        accelerator="cpu", devices=1, logger=logger, callbacks=[GradientNorms(steps=9), bar],
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, datamodule=data)
    return logger, bar, trainer.global_step


@pytest.mark.parametrize("every", [1, 4])
def test_the_loggers_and_the_bar_get_the_same_values_as_when_every_step_logged(monkeypatch, every):
    judged: list[bool] = []

    def counted(*args: Any) -> bool:
        judged.append(steplogs.is_read(*args))
        return judged[-1]

    monkeypatch.setattr("lit_models.training.stochastic.is_read", counted)
    skipped, skipped_bar, steps = fit(every)
    # every=4 over 17 steps (12 batches an epoch, a validation every 6): steps 3, 7, 11, 15 flush, 5 and 11 precede a
    # validation, 11 ends the epoch, 16 ends the fit; the other 11 skip their three values
    assert judged.count(False) == (0 if every == 1 else 3 * 11)
    monkeypatch.setattr(steplogs, "is_read", lambda *_: True)
    monkeypatch.setattr("lit_models.training.stochastic.is_read", lambda *_: True)
    logged, logged_bar, _ = fit(every)
    assert steps == 17
    assert skipped.calls == logged.calls
    train_steps = [step for step, metrics in logged.calls if "train/loss" in metrics]
    assert len(train_steps) == 17 // every  # a real comparison: per-step values flushed on schedule
    assert any("train/grad_norm/total" in m for _, m in logged.calls) and any("train/reward" in m
                                                                              for _, m in logged.calls)
    flushed = [i for i in range(17) if (i + 1) % every == 0]  # the bar is read when Lightning refreshes it
    assert [skipped_bar.seen[i] for i in flushed] == [logged_bar.seen[i] for i in flushed]
    assert skipped_bar.read == logged_bar.read and len(logged_bar.read) >= 4  # validations, epoch end, fit end
    assert all("train/loss" in r for r in logged_bar.read[1:])


def test_a_call_it_cannot_judge_is_kept():
    module = RecurrentSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, hidden_size=8, embed_dim=8)
    assert steplogs.is_read(module, (), {})  # no trainer
    module._current_fx_name = "training_step"
    assert steplogs.is_read(module, (True,), {})  # positional options: not judged


def test_the_lightning_property_it_reads_still_exists():
    from lightning.pytorch.trainer.connectors.logger_connector.logger_connector import _LoggerConnector

    assert isinstance(_LoggerConnector.__dict__["should_update_logs"], property)


def test_the_gradient_probe_reaches_the_loggers_only_inside_its_window():
    """Lightning re-sends a stored per-step value at every flush to the epoch's end; the probe drops its values once
    its steps have passed (``steplogs.forget``), so no flush after its window carries them under a later step."""
    L.seed_everything(3)
    data = SyntheticSeq2Seq(task="reverse", vocab_size=12, min_len=3, max_len=6, train_size=96, val_size=16,
                            test_size=16, batch_size=8, max_tokens=None)
    model = RecurrentSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, cell="gru", attention="additive", embed_dim=8,
                             hidden_size=8, bidirectional=False, dropout=0.0)
    logger = Received()
    trainer = L.Trainer(max_steps=12, log_every_n_steps=2, limit_val_batches=0, accelerator="cpu", devices=1,
                        logger=logger, callbacks=[GradientNorms(steps=3)], enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, datamodule=data)
    flushed = [step for step, metrics in logger.calls if "train/loss" in metrics]
    probed = [step for step, metrics in logger.calls if "train/grad_norm/total" in metrics]
    assert flushed == [1, 3, 5, 7, 9, 11]  # one epoch of 12 batches, flushed every 2 steps
    assert probed == [1]  # steps 0-2 probed; the flush at step 3 would carry step 2's value, labelled 3


def test_forget_outside_a_fit_loop_drops_nothing():
    assert steplogs.forget(L.Trainer(logger=False, enable_progress_bar=False), ("train/",)) == 0
