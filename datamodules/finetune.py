"""The last training batches of a run as a short fine-tune at an extended length (``TextLM.finetune_steps``).

Chen et al. 2023 ("Extending Context Window of Large Language Models via Positional Interpolation", §3.1-3.2)
pre-train at a context L, then fine-tune about 1000 steps on windows of the extended context L' = s·L with the
interpolated positions in force. Here both phases are one run, so a trial depends on no other trial's checkpoint:
:class:`TailBatches` batches the training sampler's indices exactly as a plain ``DataLoader`` does, and marks the
run's last ``tail`` batches as fine-tune batches; their windows (``TextLM``) are ``finetune_context`` tokens long
and the model trains on them with its RoPE scaling in force (``attnlab_core.batches.TextBatch.finetune``).
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

from torch.utils.data import DistributedSampler, Sampler

from attnlab_core.errors import UsageError


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
    """A map-style dataset whose item is its key: :class:`TailBatches` yields ``(index, finetune)`` keys and the
    collate function reads them (the text is sliced there, from the window starts)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key: tuple[int, bool]) -> tuple[int, bool]:
        return key


class TailBatches(Sampler[list[tuple[int, bool]]]):
    """Batches of ``sampler``'s indices, ``batch_size`` each in its order (the last one shorter, as a ``DataLoader``
    with ``batch_size`` and ``drop_last=False`` makes them), each index paired with whether its batch is one of
    the run's last ``tail`` batches.

    Args:
        sampler: the training sampler (its ``epoch``, set by Lightning or ``attnlab_run.faults``, places the epoch).
        batch_size: indices per batch.
        tail: how many of the run's last batches are fine-tune batches (0: none).
        length: given the batches of one epoch (``len(self)``), the batches an epoch draws (fewer under a trainer's
            ``limit_train_batches``) and the run's (:func:`run_batches`); read when an epoch starts, when the
            trainer knows them.
    """

    def __init__(self, sampler: DistributedSampler, *, batch_size: int, tail: int,
                 length: Callable[[int], tuple[int, float]]) -> None:
        self.sampler, self.batch_size, self.tail, self.length = sampler, batch_size, tail, length

    def __len__(self) -> int:
        return math.ceil(len(self.sampler) / self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        """Lightning calls it on a loader's ``batch_sampler``; the order is the inner sampler's."""
        self.sampler.set_epoch(epoch)

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
            raise UsageError(f"finetune_steps={self.tail} is not allowed: the run trains {int(total)} batches")
        return per_epoch, total - self.tail, total

    def __iter__(self) -> Iterator[list[tuple[int, bool]]]:
        per_epoch, first, end = self.tail_span()
        at = getattr(self.sampler, "epoch", 0) * per_epoch  # the run-wide index of this epoch's first batch
        batch: list[int] = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield [(i, first <= at < end) for i in batch]
                at, batch = at + 1, []
        if batch:
            yield [(i, first <= at < end) for i in batch]
