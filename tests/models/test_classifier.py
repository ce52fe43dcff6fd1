"""SentimentClassifier and the poolings: registry coverage, weight invariants, parity with naive
references, padding invariance for every encoder x pooling, arms differ, one-batch overfit, and a
Lightning fit/test that logs val/acc, val/f1, val/loss and writes the figures."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import lightning as L
import pytest
import torch
from torch import nn

from attnlab_core.errors import UsageError
from datamodules.batching import PAD
from datamodules.sentiment import SentimentData
from lit_models.axes import EncoderFamily, Pooling
from lit_models.blocks.pooling import AttentionPooling, LastPooling, MaxPooling
from lit_models.builders import build_classifier
from lit_models.families.classifier import SentimentClassifier
from lit_models.registries import POOLINGS, PREPENDS_CLS
from lit_models.specs import ClassifierSpec, RecurrentEncoderSpec, TransformerSpec

ARCH = {"cell": "lstm", "embed_dim": 16, "hidden_size": 12, "num_layers": 1, "bidirectional": True, "d_model": 16,
        "heads": 2, "d_ff": 32, "norm": "pre", "positions": "sinusoidal", "attn_scale": "sqrt_dk",
        "max_positions": 64, "attn_size": 8, "dropout": 0.0}


def net(encoder: EncoderFamily, pooling: Pooling, seed: int = 0, **kw: object) -> nn.Module:
    torch.manual_seed(seed)
    a = {**ARCH, **kw}
    spec = TransformerSpec(d_model=a["d_model"], heads=a["heads"], d_ff=a["d_ff"], encoder_layers=a["num_layers"],
                           dropout=a["dropout"], attn_dropout=0.0, norm=a["norm"], attn_scale=a["attn_scale"],
                           positions=a["positions"], max_positions=a["max_positions"])  # type: ignore[arg-type]
    rnn = RecurrentEncoderSpec(cell=a["cell"], embed_dim=a["embed_dim"], hidden_size=a["hidden_size"],
                               num_layers=a["num_layers"], bidirectional=a["bidirectional"],
                               dropout=a["dropout"])  # type: ignore[arg-type]
    arch = ClassifierSpec(encoder=encoder, pooling=pooling, attn_size=a["attn_size"], dropout=a["dropout"],
                          recurrent=rnn, transformer=spec)  # type: ignore[arg-type]
    return build_classifier(arch, vocab_size=30, num_classes=3).eval()


def padded(lengths: list[int], width: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    tokens = torch.randint(4, 30, (len(lengths), width), generator=g)
    for i, n in enumerate(lengths):
        tokens[i, n:] = PAD
    return tokens


def test_registry_covers_the_literal() -> None:
    assert set(POOLINGS) == set(get_args(Pooling)) == set(PREPENDS_CLS)


@pytest.mark.parametrize("pooling", ["mean", "max", "attention"])
def test_weights_sum_to_one_and_are_zero_on_padding(pooling: Pooling) -> None:
    states, mask = torch.randn(3, 7, 8), torch.arange(7)[None] < torch.tensor([[7], [4], [1]])
    out = POOLINGS[pooling](d_in=8, attn_size=5, directions=1)(states, mask)
    assert torch.allclose(out.weights.sum(-1), torch.ones(3), atol=1e-6)
    assert (out.weights[~mask] == 0).all()


def test_attention_pooling_matches_the_han_equations() -> None:
    torch.manual_seed(0)
    pool = AttentionPooling(d_in=6, attn_size=4)
    states, lengths = torch.randn(2, 5, 6), [5, 3]
    mask = torch.arange(5)[None] < torch.tensor(lengths)[:, None]
    out = pool(states, mask)
    for b, n in enumerate(lengths):
        u = torch.tanh(states[b, :n] @ pool.proj.weight.T + pool.proj.bias)  # u_t = tanh(W h_t + b)
        alpha = torch.softmax(u @ pool.context, dim=0)  # α_t = softmax(u_tᵀ u_w)
        assert torch.allclose(out.weights[b, :n], alpha, atol=1e-6)
        assert torch.allclose(out.pooled[b], alpha @ states[b, :n], atol=1e-6)  # s = Σ α_t h_t


def test_last_pooling_is_the_final_state_of_each_lstm_direction() -> None:
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 5, batch_first=True, bidirectional=True)
    x, lengths = torch.randn(2, 6, 4), [6, 3]
    packed = nn.utils.rnn.pack_padded_sequence(x, torch.tensor(lengths), batch_first=True, enforce_sorted=False)
    out, (h_n, _) = lstm(packed)
    states, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=6)
    mask = torch.arange(6)[None] < torch.tensor(lengths)[:, None]
    pooled = LastPooling(directions=2)(states, mask).pooled
    assert torch.allclose(pooled, torch.cat([h_n[0], h_n[1]], dim=-1), atol=1e-6)


def test_max_pooling_ignores_padding_even_when_padding_is_larger() -> None:
    states = torch.tensor([[[1.0, -2.0], [-1.0, -3.0], [9.0, 9.0]]])
    mask = torch.tensor([[True, True, False]])
    out = MaxPooling()(states, mask)
    assert out.pooled.tolist() == [[1.0, -2.0]] and out.weights.tolist() == [[1.0, 0.0, 0.0]]


@pytest.mark.parametrize("encoder", get_args(EncoderFamily))
@pytest.mark.parametrize("pooling", get_args(Pooling))
def test_padding_invariance_for_every_arm(encoder: EncoderFamily, pooling: Pooling) -> None:
    model = net(encoder, pooling)
    tokens = padded([6, 3], 6)
    wider = torch.cat([tokens, torch.full((2, 4), PAD)], dim=1)
    a, b = model(tokens), model(wider)
    assert torch.allclose(a.logits, b.logits, atol=1e-5)
    if a.weights is not None:
        assert a.weights.shape == (2, 6) and torch.allclose(a.weights, b.weights[:, :6], atol=1e-6)


@pytest.mark.parametrize("encoder", get_args(EncoderFamily))
def test_pooling_arms_differ(encoder: EncoderFamily) -> None:
    tokens = padded([6, 4, 5], 6)
    outputs = {p: net(encoder, p, seed=0)(tokens).logits for p in get_args(Pooling)}
    names = list(outputs)
    for i, p in enumerate(names):
        for q in names[i + 1:]:
            assert not torch.allclose(outputs[p], outputs[q]), (p, q)


def test_cls_with_unidirectional_recurrent_encoder_is_refused() -> None:
    with pytest.raises(UsageError, match="bidirectional=true"):
        net("recurrent", "cls", bidirectional=False)


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm", "lstm_peephole"])
def test_every_cell_builds_unidirectional(cell: str) -> None:
    assert net("recurrent", "last", cell=cell, bidirectional=False)(padded([3, 2], 3)).logits.shape == (2, 3)


def test_overfits_one_batch() -> None:
    dm = SentimentData(train_size=16, val_size=8, test_size=8, batch_size=16, max_words=12)
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    torch.manual_seed(0)
    model = SentimentClassifier(src_vocab_size=dm.src_vocab_size, embed_dim=16, hidden_size=16, dropout=0.0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(60):
        loss = nn.functional.cross_entropy(model(batch.tokens).logits, batch.labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert (model(batch.tokens).logits.argmax(-1) == batch.labels).all()


def test_fit_and_test_log_metrics_and_write_figures(tmp_path: Path) -> None:
    dm = SentimentData(train_size=32, val_size=8, test_size=8, batch_size=8, max_words=12)
    model = SentimentClassifier(src_vocab_size=dm.src_vocab_size, embed_dim=8, hidden_size=8, attn_size=8)
    trainer = L.Trainer(max_epochs=1, limit_train_batches=2, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=str(tmp_path), num_sanity_val_steps=0)
    trainer.fit(model, datamodule=dm)
    assert {"val/acc", "val/f1", "val/loss"} <= set(trainer.callback_metrics)
    model.eval()
    with torch.no_grad():  # val/acc is the share of right predictions over every validation example
        pairs = [(model(t).logits.argmax(-1), y) for t, y in dm.val_dataloader()]
    right = sum(int((p == y).sum()) for p, y in pairs)
    assert float(trainer.callback_metrics["val/acc"]) == pytest.approx(right / 8), (right, trainer.callback_metrics)
    trainer.test(model, datamodule=dm)
    assert {"test/acc", "test/f1", "test/loss"} <= set(trainer.callback_metrics)
    predictions = [p for batch in trainer.predict(model, datamodule=dm) for p in batch]
    assert len(predictions) == 8 and set(predictions) <= {"negative", "positive"}
    figures = {p.name for p in (tmp_path / "figures").iterdir()}
    assert {"confusion_val.png", "confusion_test.png", "importance_ex0.png", "importance_ex1.png"} <= figures


def test_num_classes_mismatch_is_one_line(tmp_path: Path) -> None:
    dm = SentimentData(train_size=16, val_size=8, test_size=8, batch_size=8)
    model = SentimentClassifier(src_vocab_size=dm.src_vocab_size, num_classes=3)
    trainer = L.Trainer(fast_dev_run=1, accelerator="cpu", logger=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=str(tmp_path))
    with pytest.raises(UsageError, match="the data has 2 classes but --model.init_args.num_classes=3"):
        trainer.fit(model, datamodule=dm)
