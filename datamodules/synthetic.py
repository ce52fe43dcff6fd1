"""Seeded, offline synthetic seq2seq tasks (copy / reverse / sort): the default seq2seq data.

Every split is generated from its own ``torch.Generator`` seeded by ``(seed, split)``, so the data
is identical across runs and DDP ranks, never touches the global RNG, and the validation and test
examples do not depend on ``train_size``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, get_args

import torch
from torch import Tensor
from torch.utils.data import DataLoader

from datamodules.batching import N_SPECIAL, STAGE_SPLITS, SplitDataModule, build_dataloader, collate_pairs, ids_to_text
from datamodules.bucketing import token_budget_loader

SyntheticTask = Literal["copy", "reverse", "sort"]
"""Source -> target mapping: identity, reversal, or ascending sort of the content ids."""

Split = Literal["train", "val", "test"]
Pair = tuple[list[int], list[int]]

SYNTHETIC_TASKS: dict[str, Callable[[list[int]], list[int]]] = {
    "copy": lambda src: list(src),
    "reverse": lambda src: src[::-1],
    "sort": lambda src: sorted(src),
}

_SPLIT_INDEX: dict[str, int] = {"train": 0, "val": 1, "test": 2}


def split_generator(seed: int, split: Split) -> torch.Generator:
    """A CPU generator whose stream depends only on ``(seed, split)`` (distinct per split)."""
    return torch.Generator().manual_seed((seed * len(_SPLIT_INDEX) + _SPLIT_INDEX[split]) % 2**63)


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


class SyntheticSeq2Seq(SplitDataModule):
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
        train_size: number of training pairs.
        val_size: number of validation pairs.
        test_size: number of test (and predict) pairs.
        batch_size: pairs per batch (per DDP rank).
        seed: seed of the data and of the training shuffle; same on every rank.
        num_workers: DataLoader worker processes.
        max_tokens: if set, training batches are length-bucketed with at most this many padded
            target tokens (``batch_size`` is then ignored for training); evaluation keeps ``batch_size``.
    """

    def __init__(
        self,
        *,
        task: SyntheticTask = "reverse",
        vocab_size: int = 24,
        min_len: int = 3,
        max_len: int = 12,
        test_min_len: int | None = None,
        test_max_len: int | None = None,
        train_size: int = 20000,
        val_size: int = 500,
        test_size: int = 500,
        batch_size: int = 64,
        seed: int = 1234,
        num_workers: int = 0,
        max_tokens: int | None = None,
    ) -> None:
        super().__init__()
        self.task: SyntheticTask = task
        self.vocab_size = vocab_size
        self.min_len, self.max_len = min_len, max_len
        self.test_min_len = min_len if test_min_len is None else test_min_len
        self.test_max_len = max_len if test_max_len is None else test_max_len
        self.sizes: dict[str, int] = {"train": train_size, "val": val_size, "test": test_size}
        self.batch_size = batch_size
        self.seed = seed
        self.num_workers = num_workers
        self.max_tokens = max_tokens
        self._validate()
        self.save_hyperparameters()
        self._data: dict[str, list[Pair]] = {}

    def _validate(self) -> None:
        """Raise a one-line ValueError naming the first invalid argument."""
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.task not in SYNTHETIC_TASKS:
            raise ValueError(f"task must be one of {get_args(SyntheticTask)}, got {self.task!r}")
        if self.vocab_size <= N_SPECIAL:
            raise ValueError(
                f"vocab_size must be > {N_SPECIAL} (the special ids) to leave content tokens, "
                f"got {self.vocab_size}"
            )
        if self.min_len < 1:
            raise ValueError(f"min_len must be >= 1, got {self.min_len}")
        if self.min_len > self.max_len:
            raise ValueError(f"min_len ({self.min_len}) must be <= max_len ({self.max_len})")
        if self.test_min_len < 1:
            raise ValueError(f"test_min_len must be >= 1, got {self.test_min_len}")
        if self.test_min_len > self.test_max_len:
            raise ValueError(
                f"test_min_len ({self.test_min_len}) must be <= test_max_len ({self.test_max_len})"
            )
        for split, size in self.sizes.items():
            if size < 1:
                raise ValueError(f"{split}_size must be >= 1, got {size}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {self.num_workers}")

    @property
    def src_vocab_size(self) -> int:
        """Source vocabulary size (== vocab_size; the CLI links it to the model at parse time)."""
        return self.vocab_size

    @property
    def tgt_vocab_size(self) -> int:
        """Target vocabulary size (== vocab_size; the CLI links it to the model at parse time)."""
        return self.vocab_size

    def split(self, name: Split) -> list[Pair]:
        """The (source, target) pairs of split ``name``, generated on first use and cached."""
        if name not in self._data:
            test = name == "test"
            self._data[name] = generate_pairs(
                task=self.task,
                n=self.sizes[name],
                min_len=self.test_min_len if test else self.min_len,
                max_len=self.test_max_len if test else self.max_len,
                vocab_size=self.vocab_size,
                generator=split_generator(self.seed, name),
            )
        return self._data[name]

    def setup(self, stage: str) -> None:
        """Generate the splits ``stage`` needs (fit: train+val; validate: val; test/predict: test)."""
        for name in STAGE_SPLITS.get(stage, ()):
            self.split(name)

    def _loader(self, name: Split) -> DataLoader:
        if self.max_tokens is not None and name == "train":
            data = self.split(name)
            return token_budget_loader(data, lengths=[len(t) + 2 for _, t in data], max_tokens=self.max_tokens,
                                       train=True, seed=self.seed, num_workers=self.num_workers,
                                       collate_fn=collate_pairs)
        return build_dataloader(
            self.split(name),  # type: ignore[arg-type]
            train=name == "train",
            batch_size=self.batch_size,
            seed=self.seed,
            num_workers=self.num_workers,
            collate_fn=collate_pairs,
        )


    def decode_tokens(self, ids: Sequence[int] | Tensor) -> str:
        """Content ids -> ``"t5 t7 ..."`` (stops at EOS, drops PAD/BOS); for BLEU and figure labels.

        Args:
            ids: (L,) token ids.
        """
        return ids_to_text(ids)
