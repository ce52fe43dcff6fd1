"""Probes: attention entropy, per-layer gradient norms, and the exposure-bias (free-running) loss."""

from __future__ import annotations

import math

import lightning as L
import pytest
import torch

from datamodules.batching import BOS, EOS, PAD
from datamodules.synthetic import SyntheticSeq2Seq
from lit_models.callbacks.grad_probes import GradientNorms, layer_grad_norms, parameter_group, qk_grad_norms
from lit_models.callbacks.probes import (
    AlignmentMass,
    AttentionEntropy,
    FreeRunningLoss,
    alignment_mass,
    alignment_readings,
    attention_entropy,
    default_probes,
    fed_positions,
    stepwise_loss,
    target_positions,
)
from lit_models.families.recurrent_seq2seq import RecurrentSeq2Seq
from lit_models.families.seq2seq import TransformerSeq2Seq


def test_entropy_is_log_k_for_uniform_and_zero_for_one_hot():
    uniform = torch.full((2, 3, 4, 5), 0.2)
    assert attention_entropy(uniform, query_mask=torch.ones(2, 4, dtype=torch.bool)) == pytest.approx(math.log(5))
    one_hot = torch.zeros(2, 1, 4, 5)
    one_hot[..., 2] = 1.0
    assert attention_entropy(one_hot, query_mask=torch.ones(2, 4, dtype=torch.bool)) == pytest.approx(0.0)


def test_entropy_skips_masked_queries_and_rows_that_are_not_distributions():
    w = torch.zeros(1, 1, 3, 4)
    w[0, 0, 0] = 0.25  # uniform, kept
    w[0, 0, 1, 0] = 1.0  # one-hot but masked out
    mask = torch.tensor([[True, False, True]])  # row 2 is all zeros: not a distribution, left out
    assert attention_entropy(w, query_mask=mask) == pytest.approx(math.log(4))
    assert math.isnan(float(attention_entropy(torch.zeros(1, 1, 2, 3), query_mask=torch.ones(1, 2, dtype=torch.bool))))


@pytest.mark.parametrize(("name", "group"), [
    ("net.encoder.layers.3.ff.w1.weight", "encoder.layers.3"),
    ("net.decoder.layers.0.cross.q.bias", "decoder.layers.0"),
    ("net.src_embed.table.weight", "src_embed.table"),
    ("net.generator.weight", "generator"),
    ("value.weight", "value"),
])
def test_parameter_groups(name, group):
    assert parameter_group(name) == group


def test_grad_norms_add_up_to_the_total():
    model = TransformerSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, d_model=16, heads=2, d_ff=32,
                               encoder_layers=2, decoder_layers=1)
    src = torch.randint(4, 12, (3, 5))
    tgt = torch.cat([torch.full((3, 1), BOS), torch.randint(4, 12, (3, 4)), torch.full((3, 1), EOS)], 1)
    model.net(src, tgt[:, :-1]).logsumexp(-1).sum().backward()
    norms = layer_grad_norms(model)
    assert {"encoder.layers.0", "encoder.layers.1", "decoder.layers.0", "total"} <= set(norms)
    parts = sum(v**2 for k, v in norms.items() if k != "total")
    assert norms["total"] == pytest.approx(parts**0.5, rel=1e-5)


def _batch(n: int = 4, length: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.randint(4, 12, (n, length))
    src[0, -2:] = PAD
    tgt = torch.cat([torch.full((n, 1), BOS), src.flip(1), torch.full((n, 1), PAD)], 1)
    for i, row in enumerate(src):
        content = row[row != PAD].flip(0)
        tgt[i, 1:] = PAD
        tgt[i, 1 : 1 + len(content)] = content
        tgt[i, 1 + len(content)] = EOS
    return src, tgt


@pytest.mark.parametrize("family", ["transformer", "recurrent"])
def test_gold_fed_stepwise_loss_equals_the_teacher_forced_pass(family):
    torch.manual_seed(0)
    if family == "transformer":
        model = TransformerSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, d_model=16, heads=2, d_ff=32)
    else:
        model = RecurrentSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, hidden_size=16, embed_dim=8)
    model.eval()
    src, tgt = _batch()
    with torch.no_grad():
        out = model.net.teacher_forward(model.net.encode(src), tgt[:, :-1])
        logits = out[0] if isinstance(out, tuple) else out
        full = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=PAD)
        assert stepwise_loss(model.net, src, tgt, feed="gold") == pytest.approx(float(full), abs=1e-5)


class _Counter(torch.nn.Module):
    """Predicts prev + 1 with certainty, except a wrong first token: right only when fed gold."""

    def encode(self, src):
        return {"t": 0}

    def step(self, prev, state):
        nxt = torch.full_like(prev, 11) if state["t"] == 0 else (prev + 1) % 12
        return torch.nn.functional.one_hot(nxt, 12).float() * 20.0, {"t": state["t"] + 1}


def test_free_running_loss_shows_the_exposure_gap():
    tgt = torch.tensor([[BOS, 5, 6, 7, 8]])
    teacher = stepwise_loss(_Counter(), tgt, tgt, feed="gold")
    free = stepwise_loss(_Counter(), tgt, tgt, feed="own")
    assert teacher == pytest.approx(20.0 / 4, abs=1e-3)  # only the first step is wrong when fed gold
    assert free == pytest.approx(20.0, abs=1e-3)  # every step after a wrong one is wrong too


def _fit(model: L.LightningModule, callbacks: list[L.Callback]) -> dict[str, float]:
    dm = SyntheticSeq2Seq(vocab_size=12, min_len=2, max_len=5, train_size=64, val_size=16, test_size=8, batch_size=16)
    trainer = L.Trainer(max_epochs=1, callbacks=callbacks, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        accelerator="cpu", devices=1)
    trainer.fit(model, datamodule=dm)
    return {k: float(v) for k, v in trainer.callback_metrics.items()}


def test_probes_log_their_metrics_during_fit():
    torch.manual_seed(0)
    model = TransformerSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, d_model=16, heads=2, d_ff=32,
                               encoder_layers=2, decoder_layers=1)
    metrics = _fit(model, default_probes())
    for key in ("val/attn_entropy/enc_self/layer2", "val/attn_entropy/cross/layer1",
                "val/attn_entropy/dec_self/layer1", "train/grad_norm/encoder.layers.1", "train/grad_norm/total",
                "val/free_running_loss", "val/exposure_gap", "train/grad_qk/total", "val/align_mass",
                "val/align_mass/predicted/cross/layer1", "val/align_mass/fed/cross/layer1", "val/align_mass/predicted",
                "val/align_mass/fed"):
        assert key in metrics and math.isfinite(metrics[key]), key
    assert metrics["val/attn_entropy/cross/layer1"] == pytest.approx(_naive_cross_entropy(model), abs=1e-5)


def _naive_cross_entropy(model: TransformerSeq2Seq) -> float:
    """-Σ_k w log w of every cross-attention row of a real target position, averaged over heads, rows and
    examples of the probes' fixed batch (the first 32 examples of the first validation batch)."""
    dm = SyntheticSeq2Seq(vocab_size=12, min_len=2, max_len=5, train_size=64, val_size=16, test_size=8, batch_size=16)
    dm.setup("fit")
    batch = next(iter(dm.val_dataloader()))
    src, tgt_in = batch.src[:32], batch.tgt[:32, :-1]
    with torch.no_grad():
        w = model.eval().net.attention_maps(src, tgt_in)["cross/layer1"]  # (B, H, T, S)
    rows = [-sum(float(p) * math.log(float(p)) for p in w[b, h, t] if p > 0)
            for b in range(w.size(0)) for h in range(w.size(1)) for t in range(w.size(2)) if tgt_in[b, t] != PAD]
    return sum(rows) / len(rows)


def test_probes_skip_what_a_module_cannot_give():
    torch.manual_seed(0)
    no_attention = RecurrentSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, attention="none", hidden_size=16,
                                    embed_dim=8)
    metrics = _fit(no_attention, [AttentionEntropy(), FreeRunningLoss(), GradientNorms(steps=1)])
    assert not any(k.startswith("val/attn_entropy/") for k in metrics), "an all-zero map has no entropy"
    assert "val/free_running_loss" in metrics
    assert not any(k.startswith("val/align_mass") for k in metrics), "no attention, no alignment"

    from lightning.pytorch.demos.boring_classes import BoringModel

    assert not any(k.startswith(("val/attn", "val/free")) for k in _fit_boring(BoringModel()))


def _fit_boring(model: L.LightningModule) -> dict[str, float]:
    trainer = L.Trainer(max_epochs=1, limit_train_batches=2, limit_val_batches=1, callbacks=default_probes(),
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, accelerator="cpu", devices=1)
    trainer.fit(model)
    return {k: float(v) for k, v in trainer.callback_metrics.items()}


def test_qk_gradient_is_the_query_key_rows_of_in_proj():
    model = TransformerSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, d_model=16, heads=2, d_ff=32,
                               encoder_layers=1, decoder_layers=1)
    src = torch.randint(4, 12, (3, 5))
    tgt = torch.cat([torch.full((3, 1), BOS), torch.randint(4, 12, (3, 4)), torch.full((3, 1), EOS)], 1)
    model.net(src, tgt[:, :-1]).logsumexp(-1).sum().backward()
    norms = qk_grad_norms(model)
    enc = model.net.encoder.layers[0]
    attn = next(m for m in enc.modules() if hasattr(m, "in_proj"))
    in_proj = attn.in_proj
    assert attn.scale == pytest.approx(8**-0.5)  # d_k = 16 / 2 heads
    expected = (in_proj.weight.grad[:32].pow(2).sum() + in_proj.bias.grad[:32].pow(2).sum()).sqrt() / attn.scale
    assert norms["encoder.layers.0"] == pytest.approx(float(expected), rel=1e-5)
    assert norms["total"] == pytest.approx(math.sqrt(sum(v**2 for k, v in norms.items() if k != "total")), rel=1e-6)


def test_target_positions_for_reverse_copy_and_sort():
    src = torch.tensor([[5, 6, 7, PAD], [9, 4, 0 + 8, 6]])  # lengths 3 and 4
    rev = target_positions(src, torch.zeros(2, 6, dtype=torch.long), "reverse")
    assert rev.shape == (2, 5, 4)
    assert rev[0, 0].tolist() == [False, False, True, False] and rev[0, 2].tolist() == [True, False, False, False]
    assert not rev[0, 3].any(), "the EOS step reads no source position"
    assert rev[1, 0, 3] and rev[1, 3, 0]
    copy = target_positions(src, torch.zeros(2, 6, dtype=torch.long), "copy")
    assert copy[1].nonzero().tolist() == [[0, 0], [1, 1], [2, 2], [3, 3]]
    tgt = torch.tensor([[BOS, 5, 6, 7, EOS, PAD], [BOS, 4, 6, 8, 9, EOS]])  # sorted targets
    srt = target_positions(src, tgt, "sort")
    assert srt[1, 0].tolist() == [False, True, False, False] and srt[1, 3].tolist() == [True, False, False, False]
    assert target_positions(src, tgt, "translation") is None


def test_alignment_mass_is_one_on_the_anti_diagonal_and_one_over_s_when_uniform():
    src = torch.tensor([[5, 6, 7, 8]])
    target = target_positions(src, torch.zeros(1, 6, dtype=torch.long), "reverse")  # (1, 5, 4)
    anti = target.float()[:, None]  # (1, 1, 5, 4) all mass on the right position
    assert alignment_mass(anti, target) == pytest.approx(1.0)
    uniform = torch.full((1, 2, 5, 4), 0.25)
    assert alignment_mass(uniform, target) == pytest.approx(0.25)


def test_alignment_readings_pin_which_query_reads_each_token():
    """Reverse ``a b c`` (positions 0-2) into ``c b a``: decoder query t is fed [<s>, c, b, a][t] and predicts
    [c, b, a, </s>][t]. A map that reads, at each query, the source of the token it predicts scores 1 in the
    ``predicted`` reading; one that reads the source of the token it was fed (one row later, what some trained
    recurrent decoders do) scores 1 in the ``fed`` reading; the probe's headline is the larger."""
    src = torch.tensor([[5, 6, 7]])  # a b c
    tgt = torch.tensor([[BOS, 7, 6, 5, EOS]])  # <s> c b a </s>
    predicted = target_positions(src, tgt, "reverse")  # (1, 4, 3)
    assert predicted[0].nonzero().tolist() == [[0, 2], [1, 1], [2, 0]]  # query 0 predicts c (position 2), ...
    assert fed_positions(predicted)[0].nonzero().tolist() == [[1, 2], [2, 1], [3, 0]]  # query 1 is fed c, ...
    reads_predicted = torch.tensor([[0, 0, 1.0], [0, 1.0, 0], [1.0, 0, 0], [1 / 3, 1 / 3, 1 / 3]])
    reads_fed = torch.tensor([[1 / 3, 1 / 3, 1 / 3], [0, 0, 1.0], [0, 1.0, 0], [1.0, 0, 0]])
    one = alignment_readings(reads_predicted[None, None], predicted)
    other = alignment_readings(reads_fed[None, None], predicted)
    assert one["predicted"] == pytest.approx(1.0) and one["fed"] == pytest.approx((0 + 0 + 1 / 3) / 3)
    assert other["fed"] == pytest.approx(1.0) and other["predicted"] == pytest.approx((1 / 3 + 0 + 0) / 3)


def test_alignment_emerges_when_attention_learns_reversal():
    """Overfit a small attentional GRU on reversal: the mass on the anti-diagonal grows well above uniform."""
    torch.manual_seed(0)
    model = RecurrentSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, attention="additive", hidden_size=32, embed_dim=16,
                             lr=0.01, warmup_steps=1)
    data = SyntheticSeq2Seq(task="reverse", vocab_size=12, min_len=5, max_len=5, train_size=512, val_size=32,
                            test_size=32, batch_size=32, seed=0)
    probe = AlignmentMass()
    trainer = L.Trainer(max_epochs=6, callbacks=[probe], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        accelerator="cpu", devices=1)
    trainer.fit(model, datamodule=data)
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/align_mass")}
    assert metrics["val/align_mass"] > 0.5, metrics
    assert metrics["val/align_mass"] == max(metrics["val/align_mass/predicted"], metrics["val/align_mass/fed"])
