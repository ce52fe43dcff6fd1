"""The max-logit probe: its value is the largest allowed logit (naive loop), it taps attention only on the steps
Lightning flushes to the loggers, and it reaches metrics.csv on exactly those steps."""

import csv
import math
from types import SimpleNamespace

import lightning as L
import pytest
import torch
from lightning.pytorch.loggers import CSVLogger

from datamodules.synthetic import SyntheticSeq2Seq
from lit_models.blocks.attention import AttentionOptions, MultiHeadAttention, logit_max
from lit_models.callbacks.logit_probe import MaxLogit
from lit_models.families.seq2seq import TransformerSeq2Seq


@pytest.mark.parametrize("is_causal", [False, True])
def test_logit_max_is_the_largest_allowed_logit(is_causal):
    torch.manual_seed(0)
    q, k = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 6, 8)
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    mask[0, ..., 3:] = False
    best = -math.inf
    for b in range(2):
        for h in range(3):
            for i in range(4):
                for j in range(6):
                    if mask[b, 0, 0, j] and (not is_causal or j <= i + 2):  # bottom-right causal: S - T = 2
                        best = max(best, float(q[b, h, i] @ k[b, h, j]) * 0.5)
    assert float(logit_max(q, k, mask=mask, scale=0.5, is_causal=is_causal)) == pytest.approx(best, abs=1e-5)


class _Spy(L.Callback):
    """Which training batches ran with the attention taps set (placed after MaxLogit in the callbacks)."""

    def __init__(self) -> None:
        self.tapped: list[int] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if any(m.logit_tap is not None for m in pl_module.modules() if isinstance(m, MultiHeadAttention)):
            self.tapped.append(batch_idx)


def test_max_logit_is_logged_on_flush_steps_only(tmp_path):
    torch.manual_seed(0)
    model = TransformerSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, d_model=16, heads=2, d_ff=32,
                               encoder_layers=1, decoder_layers=1)
    dm = SyntheticSeq2Seq(vocab_size=12, min_len=2, max_len=5, train_size=128, val_size=16, test_size=8, batch_size=16)
    spy = _Spy()
    trainer = L.Trainer(max_steps=7, log_every_n_steps=3, callbacks=[MaxLogit(), spy], logger=CSVLogger(tmp_path),
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0, limit_val_batches=0, accelerator="cpu", devices=1)
    trainer.fit(model, datamodule=dm)
    assert spy.tapped == [2, 5]
    assert all(m.logit_tap is None for m in model.modules() if isinstance(m, MultiHeadAttention))
    with open(next(tmp_path.rglob("metrics.csv"))) as f:
        rows = [r for r in csv.DictReader(f) if r.get("train/max_logit")]
    assert [int(r["step"]) for r in rows] == [2, 5]
    assert all(math.isfinite(float(r["train/max_logit"])) and float(r["train/max_logit"]) > 0 for r in rows)


class _Host(torch.nn.Module):
    """What MaxLogit reads of a LightningModule: its modules and ``log``."""

    def __init__(self) -> None:
        super().__init__()
        self.mha = MultiHeadAttention(AttentionOptions(heads=2, kv_heads=2, d_head=4, scale=0.5, attn_dropout=0.0))
        self.logged: list[float] = []

    def forward(self, x):
        return self.mha.attend(*self.mha.project_qkv(x), mask=None)[0]

    def log(self, name, value, **kwargs):
        self.logged.append(float(value))


def test_max_logit_taps_do_not_recompile_the_attention():
    """Toggling the taps as MaxLogit does over 12 logging steps compiles the frame a bounded number of times
    (tap set / tap unset), not once per logging step until dynamo falls back to eager."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    torch.manual_seed(0)
    host, probe = _Host(), MaxLogit()
    compiled = torch.compile(host, backend="eager")
    flush = SimpleNamespace(should_update_logs=False)
    trainer = SimpleNamespace(is_global_zero=True, _logger_connector=flush, fast_dev_run=False)
    probe.on_fit_start(trainer, host)
    x = torch.randn(2, 5, 8)
    for step in range(24):
        flush.should_update_logs = step % 2 == 1
        probe.on_train_batch_start(trainer, host, None, step)
        compiled(x)
        probe.on_train_batch_end(trainer, host, None, None, step)
    assert len(host.logged) == 12 and all(math.isfinite(v) for v in host.logged)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] <= 3
