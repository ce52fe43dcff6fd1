"""CausalLM: the loss covers the answer only, every forcing arm trains, one batch is learnt (prompt ->
answer through the KV-cached decoder, and running text)."""

from __future__ import annotations

from typing import get_args

import pytest
import torch
import torch.nn.functional as F

from datamodules.batching import BOS, EOS, PAD
from datamodules.lm_tasks import PromptAnswerTasks
from datamodules.wikitext import TextBatch
from lit_models.axes import Forcing
from lit_models.families.causal_lm import CausalLM


def _model(**kw) -> CausalLM:
    torch.manual_seed(0)
    args = dict(tgt_vocab_size=16, d_model=32, heads=4, d_ff=64, layers=2, dropout=0.0, positions="rope",
                max_positions=64, lr=3e-3, lr_schedule="constant", warmup_steps=1)
    return CausalLM(**{**args, **kw})


def _batch(n: int = 8, task: str = "reverse", max_len: int = 6):
    dm = PromptAnswerTasks(task=task, vocab_size=16, min_len=2, max_len=max_len, train_size=n, val_size=n,
                           test_size=n, batch_size=n)
    dm.setup("fit")
    return next(iter(dm.val_dataloader()))


def test_training_loss_is_the_answer_and_eos_only():
    model, batch = _model(), _batch()
    with pytest.warns(UserWarning):  # self.log without a trainer
        loss = model.training_step(batch, 0)
    # independent: one plain LM pass over each unpadded sequence prompt · BOS · answer · EOS
    answer_nll, all_nll = [], []
    for src, tgt in zip(batch.src, batch.tgt, strict=True):
        prompt, gold = src[src != PAD], tgt[tgt != PAD]  # gold = [BOS, y.., EOS]
        seq = torch.cat([prompt, gold])
        with torch.no_grad():
            nll = F.cross_entropy(model.net.lm_logits(seq[None, :-1])[0], seq[1:], reduction="none")
        answer_nll.append(nll[len(prompt):])  # targets y_1 .. EOS, predicted from BOS onwards
        all_nll.append(nll)
    expected = torch.cat(answer_nll).mean()
    torch.testing.assert_close(loss.detach(), expected, atol=1e-5, rtol=1e-5)
    assert abs(float(torch.cat(all_nll).mean()) - float(expected)) > 1e-3  # the prompt would change it


@pytest.mark.parametrize("forcing", get_args(Forcing))
def test_every_forcing_arm_gives_a_finite_loss_and_gradients(forcing):
    model, batch = _model(forcing=forcing, scheduled_steps=10), _batch()
    with pytest.warns(UserWarning):
        loss = model.training_step(batch, 0)
    loss.backward()
    grads = [p.grad for p in model.net.parameters() if p.requires_grad]
    assert torch.isfinite(loss) and all(g is not None and torch.isfinite(g).all() for g in grads)


def _fit(model: CausalLM, loss_fn, steps: int) -> float:
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        opt.step()
    return float(loss.detach())


def test_overfits_one_prompt_answer_batch_and_decodes_it_free_running():
    model, batch = _model(), _batch(task="reverse")
    labels = batch.tgt[:, 1:]

    def loss():
        logits = model.net(batch.src, batch.tgt[:, :-1])
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=PAD)

    assert _fit(model, loss, 300) < 0.05
    model.eval()
    with torch.no_grad():
        pred = model.generate(batch.src)  # KV-cached greedy decoding through blocks.decoding
    gold = F.pad(labels, (0, max(0, pred.size(1) - labels.size(1))), value=PAD)[:, : pred.size(1)]
    assert torch.equal(pred, gold)
    assert (pred == EOS).any(1).all() and not (pred == BOS).any()


def test_overfits_one_text_window():
    model = _model(positions="alibi")
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(4, 16, (4, 25), generator=g)
    batch = TextBatch(tokens=tokens, score_from=torch.zeros(4, dtype=torch.long), context=24)
    logits = lambda: model.net.lm_logits(batch.tokens[:, :-1])  # noqa: E731
    start = float(F.cross_entropy(logits().flatten(0, 1), batch.targets().flatten()).detach())
    end = _fit(model, lambda: F.cross_entropy(logits().flatten(0, 1), batch.targets().flatten()), 400)
    assert start > 2.0 and end < 0.05  # random tokens memorised: only possible by reading the context


def test_text_targets_before_score_from_are_not_scored():
    tokens = torch.arange(4, 14)[None].repeat(2, 1)
    batch = TextBatch(tokens=tokens, score_from=torch.tensor([0, 6]), context=9)
    targets = batch.targets()
    assert (targets[0] != PAD).all() and (targets[1, :6] == PAD).all() and (targets[1, 6:] != PAD).all()
