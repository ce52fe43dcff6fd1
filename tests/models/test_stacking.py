"""Seeds stacked (issue #26): K = 2 seeds trained as one vectorised model follow the two seeds trained alone.

The reference is what a trial does: ``seed_everything(seed)``, the datamodule, then the model, then
``Trainer.fit`` with gradient clipping. The stacked run builds the same K (datamodule, model) pairs
the same way and trains them through ``lit_models.training.stacking.StackedSeeds`` on the first datamodule's
loader (the seeds of an arm share the data seed, hence batches and order). With dropout off nothing
else draws randomness, so the curves must agree up to float rounding: vmap turns each matmul into a
batched one with another reduction order; over six clipped AdamW steps the losses measured 0.8-1.4e-7
apart (relative). The tolerance is 1e-5 relative: 70x that rounding, while clipping by the stack's norm
instead of each seed's moves the losses by 1e-4-3e-2 and the two seeds differ by > 1e-3 (asserted, so
the comparison cannot pass by mixing the seeds up).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import Any

import lightning as L
import pytest
import torch
from torch import nn

from datamodules.lm_tasks import PromptAnswerTasks
from datamodules.sentiment import SentimentData
from datamodules.synthetic import SyntheticSeq2Seq
from lit_models.families.causal_lm import CausalLM
from lit_models.families.classifier import SentimentClassifier
from lit_models.families.glimpse import RecurrentAttentionModel
from lit_models.families.recurrent_seq2seq import RecurrentSeq2Seq
from lit_models.families.seq2seq import TransformerSeq2Seq
from lit_models.training.stacking import NotStackable, StackedSeeds, refusal

STEPS, CLIP, SEEDS = 6, 0.5, (1, 2)
TINY = {"d_model": 16, "heads": 2, "d_ff": 32, "dropout": 0.0, "lr": 3e-3, "lr_schedule": "constant", "warmup_steps": 2}
Build = Callable[[], tuple[L.LightningDataModule, L.LightningModule]]


def seq2seq() -> tuple[L.LightningDataModule, L.LightningModule]:
    """With the cosine schedule, whose horizon is the run's step count."""
    dm = SyntheticSeq2Seq(vocab_size=16, min_len=2, max_len=6, train_size=48, val_size=8, test_size=8, batch_size=8)
    tiny = {**TINY, "lr_schedule": "cosine"}
    return dm, TransformerSeq2Seq(
        src_vocab_size=dm.src_vocab_size, tgt_vocab_size=dm.tgt_vocab_size, encoder_layers=1, decoder_layers=1, **tiny
    )


def causal() -> tuple[L.LightningDataModule, L.LightningModule]:
    dm = PromptAnswerTasks(
        task="reverse", vocab_size=16, min_len=2, max_len=5, train_size=48, val_size=8, test_size=8, batch_size=8
    )
    return dm, CausalLM(tgt_vocab_size=dm.tgt_vocab_size, layers=2, positions="rope", max_positions=64, **TINY)


def classifier() -> tuple[L.LightningDataModule, L.LightningModule]:
    dm = SentimentData(train_size=48, val_size=8, test_size=8, batch_size=8, max_words=12)
    return dm, SentimentClassifier(
        src_vocab_size=dm.src_vocab_size,
        encoder="transformer",
        pooling="mean",
        num_layers=1,
        **{k: v for k, v in TINY.items() if k != "warmup_steps"},
    )


def peephole_classifier() -> tuple[L.LightningDataModule, L.LightningModule]:
    """A recurrent family that stacks: the peephole LSTM runs its own masked loop (no packed sequence)."""
    dm = SentimentData(train_size=48, val_size=8, test_size=8, batch_size=8, max_words=12)
    return dm, SentimentClassifier(
        src_vocab_size=dm.src_vocab_size,
        encoder="recurrent",
        cell="lstm_peephole",
        embed_dim=8,
        hidden_size=8,
        dropout=0.0,
        lr=3e-3,
    )


FAMILIES = {
    "encoder-decoder": seq2seq,
    "decoder-only": causal,
    "classifier": classifier,
    "recurrent classifier": peephole_classifier,
}


def built(build: Build, seed: int) -> tuple[L.LightningDataModule, L.LightningModule]:
    """As the CLI builds a trial: the seed first, then the datamodule, then the model."""
    L.seed_everything(seed, verbose=False)
    return build()


class Losses(L.Callback):
    def __init__(self) -> None:
        self.values: list[float] = []

    def on_train_batch_end(self, trainer: L.Trainer, module: L.LightningModule, outputs: Any, *_: Any) -> None:
        self.values.append(float(outputs["loss"]))


def alone(build: Build, seed: int) -> tuple[list[float], L.LightningModule, L.LightningDataModule]:
    dm, model = built(build, seed)
    losses = Losses()
    trainer = L.Trainer(
        max_steps=STEPS,
        gradient_clip_val=CLIP,
        limit_val_batches=0,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[losses],
    )
    trainer.fit(model, datamodule=dm)
    model.alone_optimizer = trainer.optimizers[0].state_dict()
    model._trainer = None  # evaluated outside a trainer, as the unstacked seeds are (same detokenizer, names)
    return losses.values, model, dm


def stacked(build: Build) -> tuple[list[list[float]], StackedSeeds, L.LightningDataModule]:
    pairs = [built(build, seed) for seed in SEEDS]
    dm = pairs[0][0]
    dm.setup("fit")
    stack = StackedSeeds([m for _, m in pairs], gradient_clip_val=CLIP, total_steps=STEPS)
    curves: list[list[float]] = []
    for batch in dm.train_dataloader():
        if len(curves) == STEPS:
            break
        curves.append(stack.training_step(batch)["train/loss"].tolist())
    stack.unstack()
    return [list(c) for c in zip(*curves, strict=True)], stack, dm


@torch.no_grad()
def evaluation(module: nn.Module, dm: L.LightningDataModule) -> tuple[dict[str, float], list[str]]:
    """Validation metrics (the family's own ``_evaluate``) and its predictions, on ``dm``'s val split."""
    module.eval()
    dm.setup("validate")
    preds = []
    for i, batch in enumerate(dm.val_dataloader()):
        module._evaluate(batch, "val")
        preds += module.predict_step(batch, i)
    values = {k: float(v) for k, v in module._split_values("val").items() if v.dim() == 0}
    return values, preds


@pytest.mark.parametrize("family", FAMILIES)
def test_two_stacked_seeds_follow_the_two_alone(family: str) -> None:
    build = FAMILIES[family]
    runs = [alone(build, seed) for seed in SEEDS]
    curves, stack, dm = stacked(build)
    for (reference, model, own_dm), curve, module in zip(runs, curves, stack.modules, strict=True):
        assert len(reference) == STEPS
        torch.testing.assert_close(torch.tensor(curve), torch.tensor(reference), rtol=1e-5, atol=1e-6)
        (ref_values, ref_preds), (values, preds) = evaluation(model, own_dm), evaluation(module, dm)
        assert ref_values.keys() == values.keys() and "val/loss" in values
        for key in ref_values:
            assert values[key] == pytest.approx(ref_values[key], rel=1e-5, abs=1e-6), key
        assert preds == ref_preds
        assert module.tokens_seen == model.tokens_seen > 0
    for k, (_, model, _) in enumerate(runs):  # each seed's optimizer state, as its checkpoint would hold it
        own, reference = stack.optimizer_state(k), model.alone_optimizer
        assert own["param_groups"][0]["lr"] == reference["param_groups"][0]["lr"]
        assert own["state"].keys() == reference["state"].keys()
        for i, state in reference["state"].items():
            for name, value in state.items():
                torch.testing.assert_close(
                    own["state"][i][name], value, rtol=1e-4, atol=1e-9, msg=f"{i} {name}"
                )  # moments: ~g, ~g²
    assert max(abs(a - b) for a, b in zip(*curves, strict=True)) > 1e-3  # the seeds are not the same run


def test_dropout_draws_differently_per_seed() -> None:
    """With dropout on, the same parameters in both slots give two different losses (independent masks)."""
    L.seed_everything(1, verbose=False)
    dm, model = seq2seq()
    twins = [TransformerSeq2Seq(**{**dict(model.hparams), "dropout": 0.3}) for _ in SEEDS]
    twins[1].load_state_dict(twins[0].state_dict())
    dm.setup("fit")
    loss = StackedSeeds(twins).training_step(next(iter(dm.train_dataloader())))["train/loss"]
    assert abs(float(loss[0] - loss[1])) > 1e-4, loss


REFUSED = {
    "packed RNN": lambda: RecurrentSeq2Seq(
        src_vocab_size=12, tgt_vocab_size=12, cell="gru", hidden_size=8, embed_dim=8
    ),
    "REINFORCE": lambda: RecurrentSeq2Seq(
        src_vocab_size=12, tgt_vocab_size=12, cell="lstm_peephole", hidden_size=8, embed_dim=8, attention="hard"
    ),
    "no training_loss": lambda: RecurrentAttentionModel(glimpses=2, patch_size=4, scales=1, hidden_size=8),
}


@pytest.mark.parametrize("case", REFUSED)
def test_a_family_that_cannot_be_stacked_is_refused_with_its_reason(case: str) -> None:
    module = REFUSED[case]()
    why = refusal(module)
    assert why is not None and type(module).__name__ in why
    assert {"packed RNN": "packed sequences", "REINFORCE": "REINFORCE", "no training_loss": "no training_loss"}[
        case
    ] in why
    with pytest.raises(NotStackable, match="cannot stack: "):
        StackedSeeds([module, REFUSED[case]()])


def test_an_op_vmap_cannot_batch_is_refused_before_any_update() -> None:
    """A causal LM whose padded slots outnumber its learned position table reads the largest position on the
    host (``int(pos.max())``, blocks/causal.py): fine for a shared batch, not per seed."""
    def short_table() -> tuple[L.LightningDataModule, L.LightningModule]:
        dm, _ = causal()  # prompts of 2-5 tokens and their answers: up to 11 slots
        return dm, CausalLM(tgt_vocab_size=dm.tgt_vocab_size, layers=2, positions="learned", max_positions=10, **TINY)

    pairs = [built(short_table, seed) for seed in SEEDS]
    dm = pairs[0][0]
    dm.setup("fit")
    stack = StackedSeeds([m for _, m in pairs])
    before = {k: v.clone() for k, v in stack.params.items()}
    batch = next(iter(dm.train_dataloader()))
    with pytest.raises(NotStackable, match="CausalLM: vmap"):
        stack.training_step([batch, batch], per_seed=True)
    assert all(torch.equal(v, before[k]) for k, v in stack.params.items()) and stack.step == 0


def test_a_diverged_seed_stops_and_the_others_train_on() -> None:
    """A non-finite objective freezes that seed (as an alone run skips the step and stops), not the stack."""
    (dm, healthy), (_, broken) = built(seq2seq, 1), built(seq2seq, 2)
    with torch.no_grad():
        next(broken.parameters()).fill_(float("nan"))
    frozen = {k: v.clone() for k, v in broken.state_dict().items()}
    dm.setup("fit")
    stack = StackedSeeds([healthy, broken], gradient_clip_val=CLIP)
    losses = [stack.training_step(batch)["train/loss"] for batch in islice(dm.train_dataloader(), 3)]
    assert stack.diverged_at == [None, 0]
    assert all(torch.isfinite(loss[0]) for loss in losses) and float(losses[0][0]) != float(losses[-1][0])
    stack.unstack()
    for name, value in broken.state_dict().items():
        torch.testing.assert_close(value, frozen[name], rtol=0, atol=0, equal_nan=True, msg=name)


@pytest.mark.parametrize("build", [seq2seq, causal], ids=["encoder-decoder", "decoder-only"])
def test_per_seed_batches_equal_the_shared_batch_when_they_are_the_same(build: Build) -> None:
    """``per_seed``: K batches stacked along the seed dimension (seeds with their own data). The decoder-only
    model too: its position table is sized by the slot count, a shape, not by a read of the largest position."""
    runs = []
    for per_seed in (False, True):
        pairs = [built(build, seed) for seed in SEEDS]
        dm = pairs[0][0]
        dm.setup("fit")
        stack = StackedSeeds([m for _, m in pairs], gradient_clip_val=CLIP)
        batches = list(islice(dm.train_dataloader(), 3))
        runs.append([stack.training_step([b] * 2 if per_seed else b, per_seed=per_seed)["train/loss"] for b in batches])
    torch.testing.assert_close(torch.stack(runs[1]), torch.stack(runs[0]), rtol=1e-5, atol=1e-6)
