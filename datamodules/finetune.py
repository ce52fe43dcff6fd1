"""The last training batches of a run as a short fine-tune at an extended length (``TextLM.finetune_steps``,
``PromptAnswerTasks.finetune_steps``).

Chen et al. 2023 ("Extending Context Window of Large Language Models via Positional Interpolation", §3.1-3.2)
pre-train at a context L, then fine-tune about 1000 steps on windows of the extended context L' = s·L with the
interpolated positions in force. Here both phases are one run, so a trial depends on no other trial's checkpoint:
:class:`TailBatches` batches the training sampler's indices exactly as a plain ``DataLoader`` does, and marks the
run's last ``tail`` batches as fine-tune batches; their windows (``TextLM``) are ``finetune_context`` tokens long,
their prompts (``PromptAnswerTasks``) up to ``finetune_max_len``, and the model trains on them with its RoPE scaling
in force (``attnlab_core.batches.TextBatch.finetune``, ``FinetunePairs``).
Deviation: the fine-tune is the tail of the run's own schedule (same optimiser state, the learning rate where the
schedule has it), not a fresh optimiser with its own warm-up as in the paper; before it, the run is the
zero-fine-tune run of the same seed, batch for batch.

Which batches are the tail is a function of (epoch, index in the epoch) and the run's length alone, never of
the global step at the time a batch is drawn (loaders draw ahead), so a resumed run (``attnlab_run.faults``)
skips and draws the same batches as an uninterrupted one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from torch.utils.data import DataLoader, DistributedSampler

from attnlab_core.errors import UsageError
from datamodules.batching import SplitDataModule, distributed_world


def run_batches(trainer: object | None, batches: int) -> tuple[int, float]:
    """The training batches one epoch of ``batches`` draws (the trainer's ``num_training_batches``: its
    ``limit_train_batches`` applied) and the run draws: an epoch's times ``max_epochs``, capped by ``max_steps`` x
    ``accumulate_grad_batches``; one epoch without a trainer. ``math.inf`` for a run bounded by neither
    (``max_time`` is not a length known in advance)."""
    if trainer is None:
        return batches, float(batches)
    drawn = getattr(trainer, "num_training_batches", batches)
    per_epoch = batches if math.isinf(drawn) else min(int(drawn), batches)
    epochs = getattr(trainer, "max_epochs", None)
    total = math.inf if epochs in (None, -1) else float(per_epoch * epochs)
    steps = getattr(trainer, "max_steps", -1)
    if steps != -1:
        total = min(total, float(steps * getattr(trainer, "accumulate_grad_batches", 1)))
    return per_epoch, total


class Keys:
    """A map-style dataset whose item is its key: :class:`TailBatches` yields whole batches of ``(index, finetune)``
    keys (a loader with ``batch_size=None``) and the collate function reads them (it slices the text)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key: list[tuple[int, bool]]) -> list[tuple[int, bool]]:
        return key


class TailBatches(DistributedSampler):
    """The training sampler: a shuffled ``DistributedSampler`` over ``size`` windows (the same order and shards as
    one used with a plain ``DataLoader``) that yields its indices in batches of ``batch_size`` (the last one shorter,
    as ``drop_last=False`` makes them), each index paired with whether its batch is one of the run's last ``tail``.

    It is a ``DistributedSampler`` itself, so Lightning sets its epoch and never wraps it, and a loader over it has
    ``batch_size=None`` (:class:`Keys`); its length is its number of batches.

    Args:
        size: the number of training windows.
        num_replicas, rank, seed: as ``DistributedSampler``'s (shuffled, nothing dropped).
        batch_size: indices per batch.
        tail: how many of the run's last batches are fine-tune batches (0: none).
        length: given the batches of one epoch (``len(self)``), the batches an epoch draws and the run's
            (:func:`run_batches`); read when an epoch starts, when the trainer knows them.
    """

    def __init__(self, size: int, *, num_replicas: int, rank: int, seed: int, batch_size: int, tail: int,
                 length: Callable[[int], tuple[int, float]]) -> None:
        super().__init__(range(size), num_replicas=num_replicas, rank=rank, shuffle=True, seed=seed)  # type: ignore[arg-type]
        self.batch_size, self.tail, self.length = batch_size, tail, length

    def __len__(self) -> int:
        return math.ceil(self.num_samples / self.batch_size)

    def tail_span(self) -> tuple[int, float, float]:
        """The batches an epoch draws and the run-wide indices [first, end) of the fine-tune batches (empty without
        a tail); a one-line UsageError when the run is unbounded or has fewer batches than the tail."""
        per_epoch, total = self.length(len(self))
        if self.tail == 0:
            return per_epoch, math.inf, math.inf
        if math.isinf(total):
            raise UsageError(f"finetune_steps={self.tail} needs a run of known length: set --trainer.max_epochs "
                             "or --trainer.max_steps")
        if self.tail > total:
            raise UsageError(f"finetune_steps={self.tail} is not allowed: the run trains {int(total)} "
                             f"batch{'' if total == 1 else 'es'}")
        return per_epoch, total - self.tail, total

    def __iter__(self) -> Iterator[list[tuple[int, bool]]]:  # type: ignore[override]
        per_epoch, first, end = self.tail_span()
        at = self.epoch * per_epoch  # the run-wide index of this epoch's first batch
        batch: list[int] = []
        for index in super().__iter__():
            batch.append(index)
            if len(batch) == self.batch_size:
                yield [(i, first <= at < end) for i in batch]
                at, batch = at + 1, []
        if batch:
            yield [(i, first <= at < end) for i in batch]


def tail_loader(size: int, *, data: SplitDataModule, tail: int, collate: Callable[[list[tuple[int, bool]]], Any],
                ) -> DataLoader:
    """The training loader of a run with a fine-tune tail: :class:`TailBatches` over ``size`` examples with the
    datamodule ``data``'s seed, batch size and workers (the run's length read from its trainer when an epoch starts);
    ``collate`` turns a batch of ``(index, finetune)`` keys into the batch."""
    world, rank = distributed_world()
    batches = TailBatches(size, num_replicas=world, rank=rank, seed=data.seed, batch_size=data.batch_size,
                          tail=tail, length=lambda n: run_batches(data.trainer, n))
    return DataLoader(Keys(size), batch_size=None, sampler=batches, num_workers=data.num_workers, collate_fn=collate)
