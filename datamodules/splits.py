"""Train / validation / test: the split names, the seed of each split, and :class:`SplitSizes`, the one
split-size helper every DataModule reads its ``train_size`` / ``val_size`` / ``test_size`` through.

A generated split draws from its own seed ``3 · seed + index`` (:func:`split_seed`), so validation and
test never depend on ``train_size`` and never share a random stream with training.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import InitVar, dataclass
from typing import Literal, TypeVar

import numpy as np
import torch

from attnlab_core.errors import UsageError

Split = Literal["train", "val", "test"]
SPLITS: tuple[Split, ...] = ("train", "val", "test")
SPLIT_INDEX: dict[str, int] = {split: index for index, split in enumerate(SPLITS)}

T = TypeVar("T")


def split_seed(seed: int, split: Split) -> int:
    """The seed of ``split``'s own random stream: ``3 · seed + index`` (train 0, val 1, test 2)."""
    return seed * len(SPLITS) + SPLIT_INDEX[split]


def split_generator(seed: int, split: Split) -> torch.Generator:
    """A CPU generator whose stream depends only on ``(seed, split)`` (distinct per split)."""
    return torch.Generator().manual_seed(split_seed(seed, split) % 2**63)


@dataclass(frozen=True)
class SplitSizes(Mapping[str, int | None]):
    """The ``<split>_size`` options: examples per split, or ``None`` for all (or the corpus default).

    Read it as a mapping (``sizes["val"]``). Every given size is checked once, here: a size below 1 is a
    one-line :class:`UsageError` naming the option.

    Args:
        train / val / test: the sizes.
        nullable: the options accept ``null`` (the error says so).
    """

    train: int | None = None
    val: int | None = None
    test: int | None = None
    nullable: InitVar[bool] = False

    def __post_init__(self, nullable: bool) -> None:
        for split, size in self.items():
            if size is not None and size < 1:
                raise UsageError(f"{split}_size must be >= 1{' (or null for all)' if nullable else ''}, got {size}")

    def __getitem__(self, split: str) -> int | None:
        if split not in SPLIT_INDEX:
            raise KeyError(split)
        return getattr(self, split)

    def __iter__(self) -> Iterator[str]:
        return iter(SPLITS)

    def __len__(self) -> int:
        return len(SPLITS)

    def or_defaults(self, defaults: Mapping[str, int]) -> dict[str, int]:
        """Every split's size, ``defaults[split]`` where none is given (a generated corpus's sizes)."""
        return {split: self[split] or defaults[split] for split in SPLITS}

    def cap(self, items: Sequence[T], split: Split) -> Sequence[T]:
        """The first ``<split>_size`` items (all of them without a size)."""
        return items[: self[split]]

    def train_subset(self, n_train: int, seed: int) -> list[int] | None:
        """The indices (ascending) of a seeded ``train_size`` of ``n_train`` training items, drawn without
        replacement, or None where there is no cap or it keeps them all. The one seeded subset every corpus
        with a ``train_size`` cap takes (translation pairs, language-model windows)."""
        cap = self.train
        if cap is None or cap >= n_train:
            return None
        return np.sort(np.random.default_rng(seed).choice(n_train, size=cap, replace=False)).tolist()

    def held_out(self, n_train: int) -> int:
        """How many of ``n_train`` training examples become the validation split when a corpus publishes
        none: ``val_size``, else ``min(1000, n_train // 10)``."""
        return self.val or min(1000, n_train // 10)


def contiguous_splits(text: str, bounds: Mapping[str, tuple[float, float]]) -> dict[str, str]:
    """``text`` cut in order (never shuffled) at the fractions ``bounds[split] = (start, end)`` of its length."""
    return {split: text[int(a * len(text)): int(b * len(text))] for split, (a, b) in bounds.items()}


@dataclass(frozen=True, kw_only=True)
class SplitOptions:
    """The options every DataModule takes: how many examples per split, and how they are loaded.

    The CLI shows them flat under each DataModule (``--data.train_size``, ``--data.seed``, ...) with the
    module's defaults (``SplitDataModule.split_defaults``); a size the module gives no number is
    ``null`` by default (all of the corpus, or its default size) and may be set to ``null``.

    Args:
        train_size: training examples (per epoch where the corpus is larger).
        val_size: validation examples.
        test_size: test (and predict) examples.
        batch_size: examples per batch (per DDP rank).
        seed: seed of the data and of the training shuffle; same on every rank.
        num_workers: DataLoader worker processes.
    """

    train_size: int | None = None
    val_size: int | None = None
    test_size: int | None = None
    batch_size: int = 64
    seed: int = 1234
    num_workers: int = 0
