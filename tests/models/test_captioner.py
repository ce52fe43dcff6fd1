"""ShowAttendTell: the doubly stochastic term against a naive loop, hard-attention log-probs, the
REINFORCE estimator against the exact gradient, beam=1 = greedy, figures, and overfitting one batch
for additive (soft), hard and none."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch
import torch.nn.functional as F

from datamodules.batching import EOS, PAD
from datamodules.captioning import CaptionData
from lit_models.blocks.decoding import DecodeConfig, decode
from lit_models.families.captioner import ShowAttendTell, doubly_stochastic_penalty
from lit_models.training.reinforce import ReinforceTerm

ARMS = ("additive", "hard", "none")


@pytest.fixture(scope="module")
def batch():
    dm = CaptionData(source="shapes", train_size=16, val_size=8, test_size=8, batch_size=8, seed=3)
    dm.setup("fit")
    return next(iter(dm.val_dataloader())), dm.tgt_vocab_size


def _model(attention: str, vocab: int, **kw) -> ShowAttendTell:
    torch.manual_seed(0)
    args = dict(tgt_vocab_size=vocab, grid_size=4, cnn_width=16, attention=attention, embed_dim=16,
                hidden_size=32, lr=3e-3, warmup_steps=1)
    return ShowAttendTell(**{**args, **kw})


def test_doubly_stochastic_matches_naive_loop(batch) -> None:
    b, vocab = batch
    model = _model("additive", vocab).train()
    tgt_in = b.tgt[:, :-1]
    out = model.net.decoder.teacher_forward(model.net.encode(b.src), tgt_in)
    naive = []
    for i in range(tgt_in.size(0)):  # Σ_i (1 − Σ_t α_ti)² over the steps that emit a caption token
        total = torch.zeros(out.weights.size(-1))
        for t in range(tgt_in.size(1)):
            if tgt_in[i, t] not in (PAD, EOS):
                total = total + out.weights[i, t]
        naive.append(sum((1 - total[j]) ** 2 for j in range(total.numel())))
    torch.testing.assert_close(doubly_stochastic_penalty(out.state["attn_total"]), torch.stack(naive))
    none = _model("none", vocab)
    state = none.net.decoder.teacher_forward(none.net.encode(b.src), tgt_in).state
    assert (doubly_stochastic_penalty(state["attn_total"]) == 0).all()


def test_hard_attention_log_probs_are_those_of_the_sampled_cells(batch) -> None:
    b, vocab = batch
    model = _model("hard", vocab).train()
    dec = model.net.decoder
    state = model.net.encode(b.src)
    tgt_in = b.tgt[:, :-1]
    expected = torch.zeros(tgt_in.size(0))
    for t in range(tgt_in.size(1)):
        alpha = dec.alignment.scorer.score(state["h"][:, -1], state["keys"]).float().softmax(-1)  # (B, S)
        _, state = dec.step(tgt_in[:, t], state)
        chosen = state["attn"].argmax(-1)  # one-hot sampled cell
        assert torch.equal(state["attn"].sum(-1), torch.ones(tgt_in.size(0)))
        scored = (tgt_in[:, t] != PAD) & (tgt_in[:, t] != EOS)
        expected += torch.where(scored, alpha.gather(1, chosen[:, None]).squeeze(1).log(), torch.zeros(()))
    torch.testing.assert_close(state["attn_log_prob"], expected)


def test_reinforce_estimator_mean_matches_exact_gradient() -> None:
    """Tiny bandit: a location s ~ softmax(θ) over 4 cells earns reward r_s. The REINFORCE surrogate's
    gradient, averaged over many samples, approaches −∇_θ E[r] = −α ⊙ (r − E[r])."""
    torch.manual_seed(0)
    theta = torch.tensor([0.3, -0.2, 0.5, 0.0], requires_grad=True)
    rewards = torch.tensor([-0.2, -1.0, -0.5, -2.0])
    alpha = theta.softmax(-1)
    n = 200_000
    s = torch.multinomial(alpha.detach(), n, replacement=True)  # (N,)
    r = rewards[s]
    logits = torch.stack([torch.log1p(-r.exp()), r], dim=-1)[:, None]  # (N, 1, 2): log_softmax[1] = r
    labels = torch.ones(n, 1, dtype=torch.long)  # token 1 (not PAD): the reward is log p(1) = r
    state = {"attn_log_prob": alpha.log()[s], "attn_entropy": torch.zeros(n),
             "mask": torch.ones(n, 1, dtype=torch.bool), "memory": torch.zeros(n, 1, 1)}
    term = ReinforceTerm(baseline="moving_average", value_size=1, momentum=0.0, reinforce_weight=1.0,
                         entropy_weight=0.0)
    out = term(logits, labels, state)
    torch.testing.assert_close(out.reward, r)
    (grad,) = torch.autograd.grad(out.loss, theta)
    exact = alpha.detach() * (rewards - (alpha.detach() * rewards).sum())  # ∇ E[r]
    torch.testing.assert_close(-grad, exact, atol=4e-3, rtol=0.0)
    assert float(term.reward_average) == pytest.approx(float(r.mean()))


def test_reinforce_entropy_bonus_gradient_is_exact() -> None:
    theta = torch.tensor([0.3, -0.2, 0.5], requires_grad=True)
    log_alpha = theta.log_softmax(-1)
    entropy = -(log_alpha.exp() * log_alpha).sum()
    state = {"attn_log_prob": torch.zeros(2), "attn_entropy": entropy.expand(2),
             "mask": torch.ones(2, 1, dtype=torch.bool), "memory": torch.zeros(2, 1, 1)}
    term = ReinforceTerm(baseline="learned", value_size=1, momentum=0.9, reinforce_weight=1.0, entropy_weight=0.5)
    out = term(torch.zeros(2, 1, 3), torch.zeros(2, 1, dtype=torch.long), state)
    (grad,) = torch.autograd.grad(out.loss, theta, retain_graph=True)
    (dh,) = torch.autograd.grad(entropy, theta)
    torch.testing.assert_close(grad, -0.5 * dh)
    assert term.get_extra_state() == {"reward_average": None}


@pytest.mark.parametrize("attention", ["additive", "hard"])
def test_beam_one_equals_greedy(batch, attention: str) -> None:
    b, vocab = batch
    model = _model(attention, vocab).eval()
    lengths = model.source_lengths(b.src)
    outs = [decode(model.net, model.net.encode(b.src), src_lengths=lengths, config=cfg, bos=1, eos=2, pad=0)
            for cfg in (DecodeConfig(strategy="greedy", max_len_a=0.0, max_len_b=12),
                        DecodeConfig(strategy="beam", beam_size=1, max_len_a=0.0, max_len_b=12))]
    assert torch.equal(outs[0], outs[1])


def test_figures_overlay_each_word(batch) -> None:
    b, vocab = batch
    model = _model("additive", vocab).eval()
    model.figure_batch = type(b)(b.src[:2], b.tgt[:2], b.objects[:2], b.boxes[:2], b.refs[:2])
    figures = model.figure_plots(epoch=0)
    assert sorted(figures) == ["caption_additive_ex0", "caption_additive_ex1"]
    for fig in figures.values():
        titled = [ax.get_title() for ax in fig.axes if ax.get_title()]
        assert titled[0] == "image" and titled[-1] == "</s>"
        plt.close(fig)


def test_figure_callback_draws_overlays_and_no_heatmap(batch, tmp_path) -> None:
    """The figure callback picks the captioner's own overlays by protocol: no seq2seq heatmap is drawn."""
    from types import SimpleNamespace

    from lit_models.callbacks.figures import AttentionFigures

    b, vocab = batch
    model = _model("hard", vocab).eval()
    model.figure_batch = type(b)(b.src[:2], b.tgt[:2], b.objects[:2], b.boxes[:2], b.refs[:2])
    trainer = SimpleNamespace(sanity_checking=False, is_global_zero=True, current_epoch=0, global_step=0, loggers=[],
                              state=SimpleNamespace(fn="validate"))  # outside fit: drawn at once
    AttentionFigures(run_dir=tmp_path).on_validation_epoch_end(trainer, model)
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == ["caption_hard_ex0.png", "caption_hard_ex1.png"]


@pytest.mark.parametrize("attention", ARMS)
def test_overfits_one_batch(batch, attention: str) -> None:
    """Loss below 0.1 from ~2.9. The hard arm learns through sampled cells: at 120 steps its loss was
    0.06-0.21 over four sampling seeds (edge-sitting), at 240 steps 0.002-0.017, so it gets 240."""
    b, vocab = batch
    model = _model(attention, vocab, lr=1e-2, doubly_stochastic=0.1).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    tgt_in, labels = b.tgt[:, :-1], b.tgt[:, 1:]
    first = None
    for _ in range(240 if attention == "hard" else 120):
        logits, state = model.net.teacher_forward(model.net.encode(b.src), tgt_in)
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=PAD)
        aux = doubly_stochastic_penalty(state["attn_total"]).mean() * 0.01 + model.reinforce(logits, labels, state).loss
        opt.zero_grad()
        (loss + aux).backward()
        opt.step()
        first = float(loss.detach()) if first is None else first
    assert float(loss.detach()) < 0.1 < first, (attention, float(loss), first)


def test_gate_scales_the_context() -> None:
    """β = 1 (a huge gate bias) reproduces the ungated decoder; β = 0 removes the context."""
    from lit_models.blocks.recurrent_decoder import AttentionalDecoder
    from lit_models.registries import ATTENTION_ARMS, CELLS

    torch.manual_seed(0)
    kw = dict(cell=CELLS["lstm"], vocab_size=9, embed_dim=4, hidden_size=6, memory_size=5,
              attention=ATTENTION_ARMS["additive"])
    gated, plain = AttentionalDecoder(**kw, gate=True).eval(), AttentionalDecoder(**kw, gate=False).eval()
    plain.load_state_dict({k: v for k, v in gated.state_dict().items() if not k.startswith("gate.")})
    memory, mask = torch.randn(2, 3, 5), torch.ones(2, 3, dtype=torch.bool)
    prev = torch.tensor([1, 4])
    with torch.no_grad():
        gated.gate.proj.weight.zero_()
        gated.gate.proj.bias.fill_(50.0)
        open_, _ = gated.step(prev, gated.init_state(memory, mask, memory.mean(1)))
        reference, _ = plain.step(prev, plain.init_state(memory, mask, memory.mean(1)))
        gated.gate.proj.bias.fill_(-50.0)
        shut, _ = gated.step(prev, gated.init_state(memory, mask, memory.mean(1)))
        blank, _ = gated.step(prev, gated.init_state(memory * 0, mask, memory.mean(1)))
    torch.testing.assert_close(open_, reference)
    torch.testing.assert_close(shut, blank)
    assert not torch.allclose(open_, shut)


def test_hard_soft_mix_uses_the_expectation_for_chosen_captions(batch) -> None:
    """soft_mix = 1: every training caption of the hard arm attends like the soft arm (same scorer
    weights) and contributes no REINFORCE log-prob; soft_mix = 0 samples one-hot cells."""
    b, vocab = batch
    tgt_in = b.tgt[:, :-1]
    soft = _model("additive", vocab).train()
    mixed = _model("hard", vocab, hard_soft_mix=1.0).train()
    mixed.load_state_dict(soft.state_dict())
    out_soft = soft.net.decoder.teacher_forward(soft.net.encode(b.src), tgt_in)
    out_mixed = mixed.net.decoder.teacher_forward(mixed.net.encode(b.src), tgt_in)
    torch.testing.assert_close(out_mixed.logits, out_soft.logits)
    assert (out_mixed.state["attn_log_prob"] == 0).all() and (out_mixed.state["attn_expect"] == 1).all()
    sampled = _model("hard", vocab, hard_soft_mix=0.0).train()
    out = sampled.net.decoder.teacher_forward(sampled.net.encode(b.src), tgt_in)
    assert ((out.weights == 0) | (out.weights == 1)).all() and (out.state["attn_log_prob"] < 0).all()


@pytest.mark.ddp
def test_two_process_test_scores_every_image_once(tmp_path) -> None:
    """BLEU, CIDEr-D (whose IDF needs the whole corpus: captions are gathered from every rank) and
    localisation are the same with 1 and 2 processes on an odd-sized test set."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    from attnlab_run.cli import main

    tiny = {
        "seed_everything": 7,
        "trainer": {"max_epochs": 1, "accelerator": "cpu", "devices": 1, "enable_model_summary": False,
                    "enable_progress_bar": False},
        "model": {"class_path": "lit_models.families.captioner.ShowAttendTell",
                  "init_args": {"grid_size": 4, "cnn_width": 8, "embed_dim": 8, "hidden_size": 16}},
        "data": {"class_path": "datamodules.captioning.CaptionData",
                 "init_args": {"train_size": 8, "val_size": 5, "test_size": 11, "batch_size": 4}},
        "decode": {"max_len_a": 0.0, "max_len_b": 8},
    }
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(tiny))
    common = ["test", "--config", str(config), "--run.experiment=ddp"]
    main([*common, f"--run.root={tmp_path / 'one'}"])
    os.environ.pop("ATTNLAB_RUN_DIR", None)
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    script = Path(sys.executable).with_name("attnlab")
    cmd = [str(script), *common, f"--run.root={tmp_path / 'two'}", "--trainer.devices=2", "--trainer.strategy=ddp"]
    proc = subprocess.run(cmd, cwd=Path(__file__).parents[2], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    one, two = ({k: v for k, v in json.loads(next((tmp_path / d).glob("*/*/summary.json")).read_text())[
        "metrics"].items() if k.startswith("test/")} for d in ("one", "two"))
    assert {"test/bleu4", "test/cider_d", "test/localisation", "test/loss"} <= set(one)
    for key, value in one.items():
        assert two[key] == pytest.approx(value, abs=1e-5), key
