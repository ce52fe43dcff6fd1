"""Algorithmic tasks framed for a decoder-only language model: prompt -> answer, train short, test long.

Each example is a (prompt, answer) pair; the model reads ``prompt · BOS · answer · EOS`` as one
causal sequence (BOS is the separator) and is trained on the answer and EOS only
(``lit_models.families.causal_lm``). Batches are :class:`~datamodules.batching.Seq2SeqBatch`
(src = prompt, tgt = ``[BOS, answer, EOS]``), so decoding and metrics are shared with the
encoder-decoder families. Training/validation lengths and test lengths are set separately: test
lengths beyond ``max_len`` measure length generalization (Kazemnejad et al. 2023; Anil et al. 2022),
read from ``test/acc_by_len/...`` (and the answer's perplexity, ``test/ppl_by_len/...``).

With ``finetune_steps=K`` the run's last K training batches are a short fine-tune at the extended lengths (Chen et
al. 2023 §3.2; ``datamodules.finetune``): prompts of ``min_len .. finetune_max_len`` tokens (default the test
range's top), drawn from the training split's generator after the training pairs, in batches marked
``FinetunePairs`` so the causal LM trains on them with its RoPE scaling in force; before them the run is the
zero-fine-tune run of the same seed, batch for batch.

Tasks (``LMTask``):

- ``copy``, ``reverse``, ``sort``: as ``datamodules.synthetic`` (same generator, same seeds);
- ``duplicate``: the prompt twice (Kazemnejad et al. 2023, Table 1);
- ``addition``: two n-digit numbers, prompt ``a + b`` and answer ``a + b``'s digits, every number
  written least-significant digit first (the "reversed" format of Lee et al. 2023, §4, in which
  each answer digit depends only on digits already seen). n is the length, uniform in
  [min_len, max_len]; the leading (most significant) digit is never 0.
- ``recall``: multi-query associative recall (Ba et al. 2016; Arora et al. 2023, "Zoology", MQAR): n
  key-value pairs ``k1 v1 … kn vn``, then every key once more in a random order ``q1 … qn``; the answer is
  ``v(q1) … v(qn)``. Keys are distinct, drawn from the lower half of the content ids, values (repeats
  allowed) from the upper half; n is the length, uniform in [min_len, max_len]. Each answer token needs a
  look-up by content (the query key, n positions back in the prompt), a retrieval the attention heads
  and their key/value heads must hold; deviation from MQAR: the queries come as one block after the
  pairs, not each followed by its answer, since the answer follows the separator in this framing.

Every split comes from its own seeded generator (``splits.split_generator``): identical on every
rank and run; validation and test do not depend on ``train_size``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch
from torch import Tensor
from torch.utils.data import DataLoader

from attnlab_core.batches import FinetunePairs, Seq2SeqBatch
from datamodules.batching import N_SPECIAL, collate_pairs, ids_to_text, require
from datamodules.finetune import tail_loader
from datamodules.splits import Split, split_generator
from datamodules.synthetic import Pair, PairTasks, SyntheticSeq2Seq

LMTask = Literal["copy", "reverse", "sort", "duplicate", "addition", "recall"]
"""Prompt -> answer mapping: identity, reversal, ascending sort, the prompt twice, the sum of two numbers, or the
values of queried keys (associative recall)."""

DIGIT0 = N_SPECIAL  # ids of the digits 0..9 in the addition task
PLUS = N_SPECIAL + 10
ADDITION_VOCAB = N_SPECIAL + 11


def _duplicate(**kw) -> list[Pair]:
    return [(src, src + src) for src, _ in SyntheticSeq2Seq.tasks["copy"](**kw)]


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


def recall_vocab(max_len: int) -> int:
    """The smallest vocabulary for ``recall`` with up to ``max_len`` pairs: the specials, max_len keys, max_len
    values."""
    return N_SPECIAL + 2 * max_len


def _recall(*, n: int, min_len: int, max_len: int, vocab_size: int, generator: torch.Generator) -> list[Pair]:
    keys = (vocab_size - N_SPECIAL) // 2  # key ids N_SPECIAL .. N_SPECIAL + keys - 1, values above
    lengths = torch.randint(min_len, max_len + 1, (n,), generator=generator).tolist()
    pairs = []
    for length in lengths:
        k = (torch.randperm(keys, generator=generator)[:length] + N_SPECIAL).tolist()  # distinct keys
        v = torch.randint(N_SPECIAL + keys, vocab_size, (length,), generator=generator).tolist()
        order = torch.randperm(length, generator=generator).tolist()
        prompt = [t for kv in zip(k, v, strict=True) for t in kv] + [k[i] for i in order]
        pairs.append((prompt, [v[i] for i in order]))
    return pairs


LM_TASKS: dict[LMTask, Callable[..., list[Pair]]] = {
    **SyntheticSeq2Seq.tasks,
    "duplicate": _duplicate,
    "addition": _addition,
    "recall": _recall,
}
"""Task -> generator(n, min_len, max_len, vocab_size, generator) -> (prompt, answer) pairs."""


class PromptAnswerTasks(PairTasks):
    """Synthetic prompt -> answer tasks for ``lit_models.families.causal_lm.CausalLM`` (see the module docstring).

    Args:
        task: one of ``LMTask``.
        vocab_size: vocabulary size including the 4 special ids (addition needs >= 15: digits and '+').
        min_len: shortest train/val length (prompt length; digits per operand for addition).
        max_len: longest train/val length.
        test_min_len: shortest test length; default min_len.
        test_max_len: longest test length; default 2 * max_len (beyond the training range).
        finetune_steps: the run's last N training batches are a fine-tune at the extended lengths, trained on with
            the model's RoPE scaling in force (Chen et al. 2023 §3.2); 0 = none, the run unchanged.
        finetune_max_len: the fine-tune's longest prompt (> max_len); default test_max_len.
    """

    tasks = LM_TASKS
    split_defaults = {"train_size": 20000, "val_size": 500, "test_size": 1000}

    def __init__(
        self,
        *,
        task: LMTask = "reverse",
        vocab_size: int = 24,
        min_len: int = 1,
        max_len: int = 10,
        test_min_len: int | None = None,
        test_max_len: int | None = None,
        finetune_steps: int = 0,
        finetune_max_len: int | None = None,
        **split: Any,
    ) -> None:
        super().__init__(task=task, vocab_size=vocab_size, min_len=min_len, max_len=max_len,
                         test_min_len=min_len if test_min_len is None else test_min_len,
                         test_max_len=2 * max_len if test_max_len is None else test_max_len,
                         split=self.split_spec(**split))
        self.finetune_steps = finetune_steps
        self.finetune_max_len = self.test_max_len if finetune_max_len is None else finetune_max_len
        self.finetune_pairs: list[Pair] = []
        longest = max(max_len, self.test_max_len, self.finetune_max_len if finetune_steps else 0)
        require([
            (vocab_size > N_SPECIAL, f"vocab_size must be > {N_SPECIAL}, got {vocab_size}"),
            (task != "addition" or vocab_size >= ADDITION_VOCAB,
             f"task=addition needs vocab_size >= {ADDITION_VOCAB} (10 digits and '+'), got {vocab_size}"),
            (task != "recall" or vocab_size >= recall_vocab(longest),
             f"task=recall needs vocab_size >= {recall_vocab(longest)} (a key and a value id per pair, up to "
             f"{longest} pairs), got {vocab_size}"),
            (finetune_steps >= 0, f"finetune_steps={finetune_steps} is not allowed: it must be an integer >= 0"),
            (finetune_steps == 0 or self.finetune_max_len > max_len,
             f"finetune_max_len={self.finetune_max_len} is not allowed: the fine-tune's prompts must reach beyond "
             f"max_len={max_len}"),
            *self.task_checks(),
        ])
        self.save_hyperparameters()

    def draw(self, split: Split) -> list[Pair]:
        """As the base's; with a fine-tune, the training split's generator goes on, after the training pairs, to
        draw as many fine-tune pairs of ``min_len .. finetune_max_len`` (so the training pairs are unchanged)."""
        if split != "train" or not self.finetune_steps:
            return super().draw(split)
        generator = split_generator(self.seed, "train")
        train = self.pairs(self.sizes["train"], min_len=self.min_len, max_len=self.max_len, generator=generator)
        self.finetune_pairs = self.pairs(len(train), min_len=self.min_len, max_len=self.finetune_max_len,
                                         generator=generator)
        return train

    def setup(self, stage: str) -> None:
        super().setup(stage)
        if stage == "fit" and self.finetune_steps:  # the run's length against the tail, before any loop starts
            self._loader("train").sampler.tail_span()  # type: ignore[attr-defined]

    def _loader(self, name: Split) -> DataLoader:
        if name != "train" or not self.finetune_steps:
            return self.loader(self.split(name), name, collate_fn=collate_pairs)  # type: ignore[arg-type]
        train = self.split("train")

        def collate(keys: list[tuple[int, bool]]) -> Seq2SeqBatch:
            if keys[0][1]:  # a fine-tune batch: its indices pick fine-tune pairs
                return FinetunePairs(*collate_pairs([self.finetune_pairs[i] for i, _ in keys]))
            return collate_pairs([train[i] for i, _ in keys])

        return tail_loader(len(train), data=self, tail=self.finetune_steps, collate=collate)

    def decode_tokens(self, ids: Sequence[int] | Tensor) -> str:
        """Ids -> text (stops at EOS): digits and '+' for addition, ``t<id>`` otherwise."""
        if self.task != "addition":
            return ids_to_text(ids)
        itos = [f"<{i}>" for i in range(N_SPECIAL)] + [str(d) for d in range(10)] + ["+"]
        itos += [f"t{i}" for i in range(len(itos), self.vocab_size)]
        return ids_to_text(ids, itos=itos)
