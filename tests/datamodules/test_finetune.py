"""The fine-tune at the extended length (``TextLM.finetune_steps``, ``datamodules.finetune``): with it off the
training batches are those of a plain shuffled ``DataLoader`` (the path before it existed, rebuilt here); with it
on, only the run's last K batches change, to windows of ``finetune_context`` tokens from the same starts, marked
``finetune``; bad values are one-line UsageErrors."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler

from attnlab_core.errors import UsageError
from datamodules.wikitext import TextLM

FIXTURE = Path(__file__).parents[1] / "fixtures" / "lm" / "tiny.txt"
L, LONG, B, N = 16, 64, 4, 30  # 30 windows: 8 batches an epoch, the last of 2


def _data(trainer=None, **options) -> TextLM:
    dm = TextLM(source="file", path=str(FIXTURE), context=L, eval_contexts=[L, 2 * L, LONG], vocab_size=40,
                train_size=N, batch_size=B, seed=7, **options)
    dm.trainer = trainer  # what Lightning attaches before setup: the fit's setup checks the run's length
    dm.setup("fit")
    return dm


def _plain_batches(dm: TextLM, epoch: int) -> list[torch.Tensor]:
    """The training batches as the loader made them before the fine-tune existed: a DataLoader over the window
    indices with a shuffled DistributedSampler(seed), windows of L + 1 tokens from the kept starts."""
    stream = dm.streams["train"]
    starts = torch.arange(0, len(stream) - L, L)
    keep = dm.sizes.train_subset(len(starts), dm.seed)
    starts = starts if keep is None else starts[keep]
    sampler = DistributedSampler(range(len(starts)), num_replicas=1, rank=0, shuffle=True, seed=dm.seed)
    sampler.set_epoch(epoch)
    loader = DataLoader(range(len(starts)), batch_size=B, sampler=sampler, collate_fn=lambda idx: idx)
    return [torch.stack([stream[int(starts[i]): int(starts[i]) + L + 1] for i in idx]) for idx in loader]


def _batches(dm: TextLM, epoch: int, trainer=None):
    dm.trainer = trainer
    loader = dm.train_dataloader()
    loader.sampler.set_epoch(epoch)  # as Lightning does each epoch
    return list(loader)


def _trainer(*, max_epochs: int = 2, max_steps: int = -1, batches: int = 8):
    return SimpleNamespace(max_epochs=max_epochs, max_steps=max_steps, accumulate_grad_batches=1,
                           num_training_batches=batches)


@pytest.mark.parametrize("epoch", [0, 1])
def test_without_the_fine_tune_the_batches_are_the_plain_loaders(epoch):
    dm = _data()
    got, plain = _batches(dm, epoch, _trainer()), _plain_batches(dm, epoch)
    assert len(got) == len(plain) == 8
    assert isinstance(dm.train_dataloader().sampler, DistributedSampler)  # Lightning neither wraps nor re-shards it
    for batch, tokens in zip(got, plain, strict=True):
        assert torch.equal(batch.tokens, tokens) and batch.context == L and not batch.finetune


def test_only_the_runs_last_k_batches_are_extended_windows_from_the_same_starts():
    k, dm = 3, _data(finetune_steps=3)
    trainer = _trainer()  # 2 epochs of 8 batches: the fine-tune is batches 13..15, the last 3 of epoch 1
    assert all(not b.finetune and b.context == L for b in _batches(dm, 0, trainer))
    got, plain = _batches(dm, 1, trainer), _plain_batches(dm, 1)
    last = len(dm.streams["train"]) - LONG - 1
    for i, (batch, tokens) in enumerate(zip(got, plain, strict=True)):
        tail = i >= len(plain) - k
        assert batch.finetune == tail and batch.context == (LONG if tail else L)
        if not tail:
            assert torch.equal(batch.tokens, tokens)
            continue
        assert batch.tokens.shape == (tokens.size(0), LONG + 1)
        for row, plain_row in zip(batch.tokens, tokens, strict=True):
            stream = dm.streams["train"]
            start = next(s for s in range(len(stream) - L) if torch.equal(stream[s: s + L + 1], plain_row))
            assert torch.equal(row, stream[min(start, last): min(start, last) + LONG + 1])


def test_the_tail_counts_the_runs_batches_across_epochs_and_max_steps():
    dm = _data(_trainer(), finetune_steps=10)  # 16 batches in 2 epochs: the last 2 of epoch 0, all 8 of epoch 1
    assert [b.finetune for b in _batches(dm, 0, _trainer())] == [False] * 6 + [True] * 2
    assert all(b.finetune for b in _batches(dm, 1, _trainer()))
    capped = _trainer(max_steps=5)  # max_steps ends the run after 5 batches, fewer than the tail
    with pytest.raises(UsageError, match="finetune_steps=10 is not allowed: the run trains 5 batches"):
        _batches(dm, 0, capped)
    dm = _data(finetune_steps=2)
    assert [b.finetune for b in _batches(dm, 0, _trainer(max_steps=5))] == [False] * 3 + [True] * 2 + [False] * 3


@pytest.mark.parametrize(("options", "message"), [
    (dict(finetune_steps=-1), "finetune_steps=-1 is not allowed: it must be an integer >= 0"),
    (dict(finetune_steps=2, finetune_context=L), f"finetune_context={L} is not allowed: the fine-tune's windows "
                                                 f"must be longer than context={L}"),
    (dict(finetune_steps=2, finetune_context=100_000), "the train text has"),
])
def test_bad_values_are_one_line_usage_errors(options, message):
    with pytest.raises(UsageError, match=message) as err:
        _data(**options)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("trainer", "message"), [
    (_trainer(max_epochs=-1), "finetune_steps=2 needs a run of known length"),
    (None, "finetune_steps=9 is not allowed: the run trains 8 batches"),  # no trainer: one epoch
    (_trainer(max_epochs=1), "finetune_steps=9 is not allowed: the run trains 8 batches"),
])
def test_the_fit_setup_refuses_a_tail_the_run_cannot_hold(trainer, message):
    with pytest.raises(UsageError, match=message) as err:
        _data(trainer, finetune_steps=2 if "=2" in message else 9)
    assert "\n" not in str(err.value)
