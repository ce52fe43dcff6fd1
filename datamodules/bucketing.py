"""Length-bucketed, token-budget batching (fairseq's ``--max-tokens``), DDP-safe.

Sorting examples by length before cutting batches removes most padding: a recurrent decoder that
steps through the longest target of its batch does about half the work on uniform lengths.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader, Sampler

from datamodules.batching import distributed_world


class _Epoch:
    """Holds the epoch; Lightning calls ``set_epoch`` on ``loader.batch_sampler.sampler`` every epoch."""

    def __init__(self) -> None:
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch


class TokenBudgetBatchSampler(Sampler[list[int]]):
    """Length-bucketed batches holding at most ``max_tokens`` padded tokens, sharded for DDP.

    Examples are sorted by length (ties broken by a seeded, per-epoch shuffle for training) and cut
    greedily into batches with ``longest · count <= max_tokens`` (an example longer than the budget
    is a batch of its own), as fairseq's ``--max-tokens``. Training shuffles the batches with
    ``(seed, epoch)`` and gives every rank the same number of batches (the list is padded by
    repeating batches, like ``DistributedSampler``); evaluation gives batch j to rank j mod W, so
    every example counts exactly once (ranks may then run different numbers of batches: never sync
    per step on such a loader). Lightning sets the epoch through ``.sampler.set_epoch``.

    Args:
        lengths: per-example size in tokens (e.g. max(source, target + 2)).
        max_tokens: budget per batch. train: shuffle + pad, or exactly-once order.
        seed: shuffle seed (same on every rank). num_replicas / rank: default from the process group.
    """

    def __init__(
        self, lengths: Sequence[int], *, max_tokens: int, train: bool, seed: int,
        num_replicas: int | None = None, rank: int | None = None,
    ) -> None:
        world, this_rank = distributed_world()
        self.lengths, self.max_tokens, self.train, self.seed = list(lengths), max_tokens, train, seed
        self.num_replicas = world if num_replicas is None else num_replicas
        self.rank = this_rank if rank is None else rank
        self.sampler = _Epoch()

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    def batches(self) -> list[list[int]]:
        """All batches of this epoch (before sharding)."""
        rng = random.Random(self.seed * 100_003 + self.sampler.epoch)
        ties = [rng.random() for _ in self.lengths] if self.train else list(range(len(self.lengths)))
        order = sorted(range(len(self.lengths)), key=lambda i: (self.lengths[i], ties[i]))
        out: list[list[int]] = []
        current: list[int] = []
        longest = 0
        for i in order:
            if current and max(longest, self.lengths[i]) * (len(current) + 1) > self.max_tokens:
                out.append(current)
                current, longest = [], 0
            current.append(i)
            longest = max(longest, self.lengths[i])
        if current:
            out.append(current)
        if self.train:
            rng.shuffle(out)
        return out

    def _shard(self) -> list[list[int]]:
        batches, w = self.batches(), self.num_replicas
        if self.train and batches:
            total = math.ceil(len(batches) / w) * w
            batches = (batches * math.ceil(total / len(batches)))[:total]
        return batches[self.rank :: w]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._shard())

    def __len__(self) -> int:
        return len(self._shard())




def token_budget_loader(
    data: Sequence[Any], *, lengths: Sequence[int], max_tokens: int, train: bool, seed: int, num_workers: int,
    collate_fn: Callable[[list[Any]], Any],
) -> DataLoader:
    """A DataLoader over ``data`` whose batches come from :class:`TokenBudgetBatchSampler`."""
    batches = TokenBudgetBatchSampler(lengths, max_tokens=max_tokens, train=train, seed=seed)
    return DataLoader(data, batch_sampler=batches, num_workers=num_workers,  # type: ignore[arg-type]
                      collate_fn=collate_fn, persistent_workers=num_workers > 0, pin_memory=torch.cuda.is_available())
