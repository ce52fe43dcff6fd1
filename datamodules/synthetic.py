"""Seeded, offline synthetic seq2seq tasks (copy / reverse / sort): the default seq2seq data.

Every split is generated from its own ``torch.Generator`` seeded by ``(seed, split)``, so the data
is identical across runs and DDP ranks, never touches the global RNG, and the validation and test
examples do not depend on ``train_size``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, ClassVar, Literal

import torch
from torch import Tensor
from torch.utils.data import DataLoader

from datamodules.batching import N_SPECIAL, DrawnSplits, OneVocabulary, collate_pairs, ids_to_text, require
from datamodules.bucketing import token_budget_loader
from datamodules.splits import Split, split_generator

SyntheticTask = Literal["copy", "reverse", "sort"]
"""Source -> target mapping: identity, reversal, or ascending sort of the content ids."""

Pair = tuple[list[int], list[int]]

SYNTHETIC_TASKS: dict[str, Callable[[list[int]], list[int]]] = {
    "copy": lambda src: list(src),
    "reverse": lambda src: src[::-1],
    "sort": lambda src: sorted(src),
}


def generate_pairs(
    *, task: SyntheticTask, n: int, min_len: int, max_len: int, vocab_size: int, generator: torch.Generator
) -> list[Pair]:
    """Draw ``n`` (source, target) pairs.

    Lengths are uniform in ``[min_len, max_len]``; tokens are uniform over the content ids
    ``N_SPECIAL .. vocab_size - 1`` (never PAD/BOS/EOS/UNK). Targets exclude BOS/EOS (added at collate).

    Args:
        task: which mapping in ``SYNTHETIC_TASKS`` gives the target.
        n: number of pairs.
        min_len: shortest source length (inclusive).
        max_len: longest source length (inclusive).
        vocab_size: total vocabulary size including the special ids.
        generator: source of randomness (consumed).
    """
    lengths = torch.randint(min_len, max_len + 1, (n,), generator=generator)  # (n,)
    tokens = torch.randint(N_SPECIAL, vocab_size, (n, max_len), generator=generator)  # (n, max_len)
    fn = SYNTHETIC_TASKS[task]
    pairs: list[Pair] = []
    for row, length in zip(tokens.tolist(), lengths.tolist(), strict=True):
        src = row[:length]
        pairs.append((src, fn(src)))
    return pairs


class PairTasks(OneVocabulary, DrawnSplits):
    """(source, target) pair tasks drawn per split: ``tasks[task]`` makes the split's pairs, train and val
    sources of ``min_len .. max_len`` tokens, test sources of ``test_min_len .. test_max_len`` (beyond the
    training range to study length generalization), each split from ``split_generator(seed, split)``.
    The other options are :class:`~datamodules.batching.SplitDataModule`'s.
    """

    tasks: ClassVar[Mapping[str, Callable[..., list[Pair]]]]
    """Task -> generator(n, min_len, max_len, vocab_size, generator) -> pairs."""

    def __init__(self, *, task: str, vocab_size: int, min_len: int, max_len: int, test_min_len: int,
                 test_max_len: int, **options: Any) -> None:
        super().__init__(**options)
        self.task, self.vocab_size = task, vocab_size
        self.min_len, self.max_len, self.test_min_len, self.test_max_len = min_len, max_len, test_min_len, test_max_len

    def task_checks(self) -> list[tuple[bool, str]]:
        """The task and length-range checks, as :func:`~datamodules.batching.require` takes them."""
        return [
            (self.task in self.tasks, f"task must be one of {tuple(self.tasks)}, got {self.task!r}"),
            (1 <= self.min_len <= self.max_len, f"need 1 <= min_len <= max_len, got {self.min_len}, {self.max_len}"),
            (1 <= self.test_min_len <= self.test_max_len,
             f"need 1 <= test_min_len <= test_max_len, got {self.test_min_len}, {self.test_max_len}"),
        ]

    def draw(self, split: Split) -> list[Pair]:
        test = split == "test"
        return self.pairs(self.sizes[split], min_len=self.test_min_len if test else self.min_len,
                          max_len=self.test_max_len if test else self.max_len,
                          generator=split_generator(self.seed, split))

    def pairs(self, n: int | None, *, min_len: int, max_len: int, generator: torch.Generator) -> list[Pair]:
        """``n`` pairs of the task with sources of ``min_len .. max_len`` tokens, drawn from ``generator``."""
        return self.tasks[self.task](n=n, min_len=min_len, max_len=max_len, vocab_size=self.vocab_size,
                                     generator=generator)


class SyntheticSeq2Seq(PairTasks):
    """Algorithmic seq2seq tasks (copy / reverse / sort), generated offline and deterministically.

    Batches are :class:`datamodules.batching.Seq2SeqBatch` (src (B, S), tgt (B, T) with BOS/EOS).
    Under DDP the loaders shard themselves (see :func:`datamodules.batching.build_dataloader`):
    the CLI runs with ``Trainer(use_distributed_sampler=False)``; train uses a seeded
    ``DistributedSampler``, val/test/predict an ``UnpaddedShardSampler`` (each example exactly once).

    Args:
        task: source -> target mapping, one of ``SyntheticTask``.
        vocab_size: total vocabulary size, including the 4 special ids (content ids are 4..vocab_size-1).
        min_len: shortest train/val source length (inclusive).
        max_len: longest train/val source length (inclusive).
        test_min_len: shortest test source length; defaults to min_len (raise it to study extrapolation).
        test_max_len: longest test source length; defaults to max_len (raise it to study extrapolation).
        max_tokens: if set, training batches are length-bucketed with at most this many padded
            target tokens (``batch_size`` is then ignored for training); evaluation keeps ``batch_size``.
    """

    tasks = {task: partial(generate_pairs, task=task) for task in SYNTHETIC_TASKS}
    split_defaults = {"train_size": 20000, "val_size": 500, "test_size": 500}

    def __init__(
        self,
        *,
        task: SyntheticTask = "reverse",
        vocab_size: int = 24,
        min_len: int = 3,
        max_len: int = 12,
        test_min_len: int | None = None,
        test_max_len: int | None = None,
        max_tokens: int | None = None,
        **split: Any,
    ) -> None:
        super().__init__(task=task, vocab_size=vocab_size, min_len=min_len, max_len=max_len,
                         test_min_len=min_len if test_min_len is None else test_min_len,
                         test_max_len=max_len if test_max_len is None else test_max_len,
                         split=self.split_spec(**split))
        self.max_tokens = max_tokens
        require([
            (max_tokens is None or max_tokens >= 1, f"max_tokens must be >= 1, got {max_tokens}"),
            (vocab_size > N_SPECIAL,
             f"vocab_size must be > {N_SPECIAL} (the special ids) to leave content tokens, got {vocab_size}"),
            *self.task_checks(),
        ])
        self.save_hyperparameters()

    def _loader(self, name: Split) -> DataLoader:
        data = self.split(name)
        if self.max_tokens is not None and name == "train":
            return token_budget_loader(data, lengths=[len(t) + 2 for _, t in data], max_tokens=self.max_tokens,
                                       train=True, seed=self.seed, num_workers=self.num_workers,
                                       collate_fn=collate_pairs)
        return self.loader(data, name, collate_fn=collate_pairs)  # type: ignore[arg-type]

    def decode_tokens(self, ids: Sequence[int] | Tensor) -> str:
        """Content ids -> ``"t5 t7 ..."`` (stops at EOS, drops PAD/BOS); for BLEU and figure labels.

        Args:
            ids: (L,) token ids.
        """
        return ids_to_text(ids)
