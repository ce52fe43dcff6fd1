"""Algorithmic tasks framed for a decoder-only language model: prompt -> answer, train short, test long.

Each example is a (prompt, answer) pair; the model reads ``prompt · BOS · answer · EOS`` as one
causal sequence (BOS is the separator) and is trained on the answer and EOS only
(``lit_models.causal_lm``). Batches are :class:`~datamodules.batching.Seq2SeqBatch`
(src = prompt, tgt = ``[BOS, answer, EOS]``), so decoding and metrics are shared with the
encoder-decoder families. Training/validation lengths and test lengths are set separately: test
lengths beyond ``max_len`` measure length generalization (Kazemnejad et al. 2023; Anil et al. 2022),
read from ``test/acc_by_len/...``.

Tasks (``LMTask``):

- ``copy``, ``reverse``, ``sort``: as ``datamodules.synthetic`` (same generator, same seeds);
- ``duplicate``: the prompt twice (Kazemnejad et al. 2023, Table 1);
- ``addition``: two n-digit numbers, prompt ``a + b`` and answer ``a + b``'s digits, every number
  written least-significant digit first (the "reversed" format of Lee et al. 2023, §4, in which
  each answer digit depends only on digits already seen). n is the length, uniform in
  [min_len, max_len]; the leading (most significant) digit is never 0.

Every split comes from its own seeded generator (``synthetic.split_generator``): identical on every
rank and run; validation and test do not depend on ``train_size``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, get_args

import torch
from torch import Tensor
from torch.utils.data import DataLoader

from attnlab_core.errors import UsageError
from datamodules.batching import N_SPECIAL, STAGE_SPLITS, SplitDataModule, build_dataloader, collate_pairs, ids_to_text
from datamodules.synthetic import Pair, Split, generate_pairs, split_generator

LMTask = Literal["copy", "reverse", "sort", "duplicate", "addition"]
"""Prompt -> answer mapping: identity, reversal, ascending sort, the prompt twice, or the sum of two numbers."""

DIGIT0 = N_SPECIAL  # ids of the digits 0..9 in the addition task
PLUS = N_SPECIAL + 10
ADDITION_VOCAB = N_SPECIAL + 11


def _mapped(task: Literal["copy", "reverse", "sort"]) -> Callable[..., list[Pair]]:
    return lambda **kw: generate_pairs(task=task, **kw)


def _duplicate(**kw) -> list[Pair]:
    return [(src, src + src) for src, _ in generate_pairs(task="copy", **kw)]


def _digits_lsb_first(value: int) -> list[int]:
    return [DIGIT0 + int(c) for c in reversed(str(value))]


def _addition(*, n: int, min_len: int, max_len: int, vocab_size: int, generator: torch.Generator) -> list[Pair]:
    lengths = torch.randint(min_len, max_len + 1, (n,), generator=generator).tolist()
    digits = torch.randint(0, 10, (n, 2, max_len), generator=generator)  # (n, 2 operands, digits)
    lead = torch.randint(1, 10, (n, 2), generator=generator)  # most significant digit, never 0
    pairs = []
    for length, row, first in zip(lengths, digits.tolist(), lead.tolist(), strict=True):
        a, b = (int("".join(map(str, [f, *r[: length - 1]]))) for f, r in zip(first, row, strict=True))
        pairs.append((_digits_lsb_first(a) + [PLUS] + _digits_lsb_first(b), _digits_lsb_first(a + b)))
    return pairs


LM_TASKS: dict[LMTask, Callable[..., list[Pair]]] = {
    "copy": _mapped("copy"),
    "reverse": _mapped("reverse"),
    "sort": _mapped("sort"),
    "duplicate": _duplicate,
    "addition": _addition,
}
"""Task -> generator(n, min_len, max_len, vocab_size, generator) -> (prompt, answer) pairs."""


class PromptAnswerTasks(SplitDataModule):
    """Synthetic prompt -> answer tasks for ``lit_models.causal_lm.CausalLM`` (see the module docstring).

    Args:
        task: one of ``LMTask``.
        vocab_size: vocabulary size including the 4 special ids (addition needs >= 15: digits and '+').
        min_len: shortest train/val length (prompt length; digits per operand for addition).
        max_len: longest train/val length.
        test_min_len: shortest test length; default min_len.
        test_max_len: longest test length; default 2 * max_len (beyond the training range).
        train_size, val_size, test_size: examples per split (predict uses test).
        batch_size: examples per batch (per DDP rank).
        seed: seed of the data and of the training shuffle; same on every rank.
        num_workers: DataLoader worker processes.
    """

    def __init__(
        self,
        *,
        task: LMTask = "reverse",
        vocab_size: int = 24,
        min_len: int = 1,
        max_len: int = 10,
        test_min_len: int | None = None,
        test_max_len: int | None = None,
        train_size: int = 20000,
        val_size: int = 500,
        test_size: int = 1000,
        batch_size: int = 64,
        seed: int = 1234,
        num_workers: int = 0,
    ) -> None:
        super().__init__()
        self.task, self.vocab_size = task, vocab_size
        self.min_len, self.max_len = min_len, max_len
        self.test_min_len = min_len if test_min_len is None else test_min_len
        self.test_max_len = 2 * max_len if test_max_len is None else test_max_len
        self.sizes: dict[str, int] = {"train": train_size, "val": val_size, "test": test_size}
        self.batch_size, self.seed, self.num_workers = batch_size, seed, num_workers
        self._validate()
        self.save_hyperparameters()
        self._data: dict[str, list[Pair]] = {}

    def _validate(self) -> None:
        """Raise a one-line UsageError naming the first invalid argument."""
        checks = [
            (self.task in LM_TASKS, f"task must be one of {get_args(LMTask)}, got {self.task!r}"),
            (self.vocab_size > N_SPECIAL, f"vocab_size must be > {N_SPECIAL}, got {self.vocab_size}"),
            (self.task != "addition" or self.vocab_size >= ADDITION_VOCAB,
             f"task=addition needs vocab_size >= {ADDITION_VOCAB} (10 digits and '+'), got {self.vocab_size}"),
            (1 <= self.min_len <= self.max_len, f"need 1 <= min_len <= max_len, got {self.min_len}, {self.max_len}"),
            (1 <= self.test_min_len <= self.test_max_len,
             f"need 1 <= test_min_len <= test_max_len, got {self.test_min_len}, {self.test_max_len}"),
            (min(self.sizes.values()) >= 1, f"split sizes must be >= 1, got {self.sizes}"),
            (self.batch_size >= 1, f"batch_size must be >= 1, got {self.batch_size}"),
            (self.num_workers >= 0, f"num_workers must be >= 0, got {self.num_workers}"),
        ]
        for ok, message in checks:
            if not ok:
                raise UsageError(message)

    @property
    def tgt_vocab_size(self) -> int:
        """The one vocabulary of prompt and answer (the CLI links it to the model)."""
        return self.vocab_size

    @property
    def src_vocab_size(self) -> int:
        return self.vocab_size

    def split(self, name: Split) -> list[Pair]:
        """The (prompt, answer) pairs of split ``name``, generated on first use and cached."""
        if name not in self._data:
            test = name == "test"
            self._data[name] = LM_TASKS[self.task](
                n=self.sizes[name], min_len=self.test_min_len if test else self.min_len,
                max_len=self.test_max_len if test else self.max_len, vocab_size=self.vocab_size,
                generator=split_generator(self.seed, name),
            )
        return self._data[name]

    def setup(self, stage: str) -> None:
        for name in STAGE_SPLITS.get(stage, ()):
            self.split(name)

    def _loader(self, name: Split) -> DataLoader:
        return build_dataloader(self.split(name), train=name == "train", batch_size=self.batch_size,  # type: ignore[arg-type]
                                seed=self.seed, num_workers=self.num_workers, collate_fn=collate_pairs)

    def decode_tokens(self, ids: Sequence[int] | Tensor) -> str:
        """Ids -> text (stops at EOS): digits and '+' for addition, ``t<id>`` otherwise."""
        if self.task != "addition":
            return ids_to_text(ids)
        itos = [f"<{i}>" for i in range(N_SPECIAL)] + [str(d) for d in range(10)] + ["+"]
        itos += [f"t{i}" for i in range(len(itos), self.vocab_size)]
        return ids_to_text(ids, itos=itos)
