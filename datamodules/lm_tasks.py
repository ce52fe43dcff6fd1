"""Algorithmic tasks framed for a decoder-only language model: prompt -> answer, train short, test long.

Each example is a (prompt, answer) pair; the model reads ``prompt · BOS · answer · EOS`` as one
causal sequence (BOS is the separator) and is trained on the answer and EOS only
(``lit_models.families.causal_lm``). Batches are :class:`~datamodules.batching.Seq2SeqBatch`
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

from datamodules.batching import N_SPECIAL, collate_pairs, ids_to_text, require
from datamodules.splits import Split
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
        **split: Any,
    ) -> None:
        super().__init__(task=task, vocab_size=vocab_size, min_len=min_len, max_len=max_len,
                         test_min_len=min_len if test_min_len is None else test_min_len,
                         test_max_len=2 * max_len if test_max_len is None else test_max_len,
                         split=self.split_spec(**split))
        require([
            (vocab_size > N_SPECIAL, f"vocab_size must be > {N_SPECIAL}, got {vocab_size}"),
            (task != "addition" or vocab_size >= ADDITION_VOCAB,
             f"task=addition needs vocab_size >= {ADDITION_VOCAB} (10 digits and '+'), got {vocab_size}"),
            (task != "recall" or vocab_size >= recall_vocab(max(max_len, self.test_max_len)),
             f"task=recall needs vocab_size >= {recall_vocab(max(max_len, self.test_max_len))} (a key and a value "
             f"id per pair, up to {max(max_len, self.test_max_len)} pairs), got {vocab_size}"),
            *self.task_checks(),
        ])
        self.save_hyperparameters()

    def _loader(self, name: Split) -> DataLoader:
        return self.loader(self.split(name), name, collate_fn=collate_pairs)  # type: ignore[arg-type]

    def decode_tokens(self, ids: Sequence[int] | Tensor) -> str:
        """Ids -> text (stops at EOS): digits and '+' for addition, ``t<id>`` otherwise."""
        if self.task != "addition":
            return ids_to_text(ids)
        itos = [f"<{i}>" for i in range(N_SPECIAL)] + [str(d) for d in range(10)] + ["+"]
        itos += [f"t{i}" for i in range(len(itos), self.vocab_size)]
        return ids_to_text(ids, itos=itos)
