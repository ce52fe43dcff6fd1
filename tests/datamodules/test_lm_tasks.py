"""Prompt -> answer tasks for the decoder-only model: each task's answer, separate train/test lengths,
determinism, and one-line errors for bad arguments."""

from typing import get_args

import pytest

from attnlab_core.errors import UsageError
from datamodules.batching import BOS, EOS, PAD
from datamodules.lm_tasks import DIGIT0, LM_TASKS, PLUS, LMTask, PromptAnswerTasks


def _number(digits_lsb_first: list[int]) -> int:
    return int("".join(str(d - DIGIT0) for d in reversed(digits_lsb_first)))


def test_registry_covers_the_task_axis():
    assert set(LM_TASKS) == set(get_args(LMTask))


@pytest.mark.parametrize("task", ["copy", "reverse", "sort", "duplicate"])
def test_answers(task):
    dm = PromptAnswerTasks(task=task, train_size=50, val_size=5, test_size=5)
    expect = {"copy": lambda p: p, "reverse": lambda p: p[::-1], "sort": sorted, "duplicate": lambda p: p + p}[task]
    for prompt, answer in dm.split("train"):
        assert answer == expect(prompt) and 1 <= len(prompt) <= 10


def test_addition_is_the_sum_written_least_significant_digit_first():
    dm = PromptAnswerTasks(task="addition", vocab_size=15, min_len=2, max_len=5, train_size=200, val_size=5,
                           test_size=5)
    for prompt, answer in dm.split("train"):
        cut = prompt.index(PLUS)
        a, b = prompt[:cut], prompt[cut + 1:]
        assert len(a) == len(b) and 2 <= len(a) <= 5 and a[-1] != DIGIT0 and b[-1] != DIGIT0
        assert _number(answer) == _number(a) + _number(b)
    assert dm.decode_tokens([DIGIT0 + 3, PLUS, DIGIT0 + 1, EOS, DIGIT0]) == "3 + 1"


def test_recall_answers_each_queried_key_with_its_value():
    dm = PromptAnswerTasks(task="recall", vocab_size=24, min_len=2, max_len=6, test_max_len=10, train_size=200,
                           val_size=5, test_size=20)
    for split in ("train", "test"):
        for prompt, answer in dm.split(split):
            n = len(answer)
            pairs, queries = prompt[: 2 * n], prompt[2 * n:]
            table = dict(zip(pairs[0::2], pairs[1::2], strict=True))
            assert len(table) == n and sorted(queries) == sorted(table)  # distinct keys, each queried once
            assert answer == [table[q] for q in queries]
            assert all(k < 4 + 10 <= v < 24 for k, v in table.items())  # keys below the values
    with pytest.raises(UsageError, match="task=recall needs vocab_size >= 24"):
        PromptAnswerTasks(task="recall", vocab_size=23, max_len=6, test_max_len=10)


def test_test_lengths_are_set_apart_from_training_lengths():
    dm = PromptAnswerTasks(task="reverse", min_len=1, max_len=4, test_min_len=5, test_max_len=9, train_size=300,
                           val_size=50, test_size=300)
    assert max(len(p) for p, _ in dm.split("train")) <= 4 and max(len(p) for p, _ in dm.split("val")) <= 4
    assert {len(p) for p, _ in dm.split("test")} == set(range(5, 10))
    assert PromptAnswerTasks(task="reverse", max_len=6).test_max_len == 12  # default: twice the training range


def test_splits_are_deterministic_and_independent_of_train_size():
    a = PromptAnswerTasks(task="duplicate", train_size=10, test_size=20)
    b = PromptAnswerTasks(task="duplicate", train_size=99, test_size=20)
    assert a.split("test") == b.split("test") and a.split("val") == b.split("val")


def test_batches_are_prompt_then_bos_answer_eos():
    dm = PromptAnswerTasks(task="reverse", train_size=8, val_size=8, test_size=8, batch_size=8)
    dm.setup("test")
    batch = next(iter(dm.test_dataloader()))
    for i, (prompt, answer) in enumerate(dm.split("test")):
        assert batch.src[i, : len(prompt)].tolist() == prompt and (batch.src[i, len(prompt):] == PAD).all()
        assert batch.tgt[i, : len(answer) + 2].tolist() == [BOS, *answer, EOS]


@pytest.mark.parametrize("kwargs, message", [
    ({"task": "addition", "vocab_size": 12}, "vocab_size >= 15"),
    ({"min_len": 5, "max_len": 3}, "min_len <= max_len"),
    ({"test_min_len": 0}, "test_min_len"),
    ({"task": "shuffle"}, "task must be one of"),
])
def test_bad_arguments_are_one_line_errors(kwargs, message):
    with pytest.raises(UsageError, match=message) as err:
        PromptAnswerTasks(**kwargs)
    assert "\n" not in str(err.value)
