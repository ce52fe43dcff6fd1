"""The one split-size helper (``datamodules.splits``) and the options every DataModule shares: sizes are
checked once (one line naming the option) for every DataModule, and the examples of each split are the
same as before the helper existed (pinned digests) and independent of ``train_size``."""

from __future__ import annotations

import hashlib
import re

import pytest

from attnlab_core.errors import UsageError
from datamodules.adding import AddingProblem
from datamodules.captioning import CaptionData
from datamodules.digits import TranslatedDigits
from datamodules.lm_tasks import PromptAnswerTasks
from datamodules.sentiment import SentimentData
from datamodules.splits import SPLITS, SplitSizes, contiguous_splits, split_seed
from datamodules.synthetic import SyntheticSeq2Seq
from datamodules.translation import TranslationData
from datamodules.wikitext import TextLM

EVERY_DATAMODULE = [SyntheticSeq2Seq, PromptAnswerTasks, AddingProblem, TranslatedDigits, TextLM, SentimentData,
                    TranslationData, CaptionData]


def test_split_sizes_read_as_a_mapping() -> None:
    sizes = SplitSizes(10, None, 3)
    assert dict(sizes) == {"train": 10, "val": None, "test": 3} and list(sizes) == list(SPLITS)
    assert sizes.or_defaults({"train": 1, "val": 2, "test": 4}) == {"train": 10, "val": 2, "test": 3}
    assert sizes.cap(list(range(20)), "train") == list(range(10)) and sizes.cap([1, 2], "val") == [1, 2]
    assert sizes.held_out(50) == 5 and sizes.held_out(100_000) == 1000 and SplitSizes(val=7).held_out(50) == 7
    with pytest.raises(KeyError):
        sizes["predict"]


@pytest.mark.parametrize("nullable, hint", [(False, ""), (True, " (or null for all)")])
def test_a_bad_size_is_one_line_naming_the_option(nullable: bool, hint: str) -> None:
    with pytest.raises(UsageError, match=f"^{re.escape(f'val_size must be >= 1{hint}, got 0')}$"):
        SplitSizes(5, 0, 5, nullable=nullable)


@pytest.mark.parametrize("option, value", [("train_size", 0), ("test_size", -1), ("batch_size", 0),
                                           ("num_workers", -1)])
@pytest.mark.parametrize("datamodule", EVERY_DATAMODULE, ids=lambda c: c.__name__)
def test_every_datamodule_checks_the_shared_options_once(datamodule, option: str, value: int) -> None:
    with pytest.raises(UsageError, match=rf"^{option} must be >= \d") as err:
        datamodule(**{option: value})
    assert "\n" not in str(err.value)


def test_split_seeds_are_the_historic_ones() -> None:
    assert [split_seed(1234, s) for s in SPLITS] == [3702, 3703, 3704]


def test_contiguous_splits_cut_in_order() -> None:
    assert contiguous_splits("abcdefghij", {"train": (0.0, 0.8), "val": (0.8, 0.9), "test": (0.9, 1.0)}) == {
        "train": "abcdefgh", "val": "i", "test": "j"}


def _lists(x: object) -> object:
    return [_lists(v) for v in x] if isinstance(x, list | tuple) else x


def _digest(items: object) -> str:
    return hashlib.sha256(repr(_lists(items)).encode()).hexdigest()[:16]


def _drawn(dm) -> dict[str, str]:
    return {s: _digest(dm.split(s)) for s in SPLITS}


def _encoded(dm) -> dict[str, str]:
    dm.setup("fit")
    return {s: _digest(dm.datasets[s]) for s in SPLITS}


PINNED = [  # sha256(repr(split as lists))[:16] with the code before SplitSizes (commit 9f29b8f)
    (lambda: _drawn(SyntheticSeq2Seq(train_size=50, val_size=7, test_size=9, test_max_len=20, batch_size=8)),
     ("2d949f67d2b8c3d5", "0a35db3c08046270", "3295dce1302d40a9")),
    (lambda: _drawn(PromptAnswerTasks(task="addition", train_size=40, val_size=6, test_size=8, batch_size=8)),
     ("9b1447b5f7a6bef0", "42f4b4e5fe4e46dd", "177a8556e16008e2")),
    (lambda: _drawn(PromptAnswerTasks(task="duplicate", train_size=40, val_size=6, test_size=8, batch_size=8)),
     ("7aba6145cdf18f6b", "da2ce13ec7c94af4", "98729fdaf5282414")),
    (lambda: _encoded(SentimentData(train_size=40, val_size=8, test_size=9, batch_size=8)),
     ("b1a16be0f23a9046", "8cad8fdcb85795e9", "52ff1af81902e28c")),
    (lambda: _encoded(TranslationData(source="synthetic", train_size=60, val_size=5, test_size=6, batch_size=8)),
     ("693c6324c202f5ed", "5ba02464deeedea6", "7e485536d11ab3e7")),
]


@pytest.mark.parametrize("digests, expected", PINNED, ids=["synthetic", "addition", "duplicate", "sentiment",
                                                           "translation"])
def test_the_same_seed_gives_the_same_examples_as_before(digests, expected) -> None:
    assert tuple(digests().values()) == expected


@pytest.mark.parametrize("make", [
    lambda n: AddingProblem(seq_len=6, train_size=n, val_size=3, test_size=4),
    lambda n: TranslatedDigits(canvas_size=28, train_size=n, val_size=3, test_size=4),
    lambda n: PromptAnswerTasks(train_size=n, val_size=3, test_size=4),
], ids=["adding", "digits", "lm_tasks"])
def test_held_out_splits_do_not_depend_on_train_size(make) -> None:
    small, large = make(5), make(9)
    for split in ("val", "test"):
        assert _digest(_rows(small.split(split))) == _digest(_rows(large.split(split)))
    assert _digest(_rows(small.split("train"))) != _digest(_rows(large.split("train")))


def _rows(data) -> list:
    return [[v.tolist() if hasattr(v, "tolist") else v for v in data[i]] for i in range(len(data))]


@pytest.mark.parametrize("cap, n", [(4, 10), (10, 10), (12, 10), (None, 10), (1, 1)])
def test_a_train_subset_is_a_seeded_ascending_draw_without_repeats(cap: int | None, n: int) -> None:
    sizes = SplitSizes(train=cap, nullable=True)
    keep = sizes.train_subset(n, seed=3)
    if cap is None or cap >= n:
        assert keep is None  # the corpus as it is, no copy
        return
    assert len(keep) == cap and keep == sorted(set(keep)) and 0 <= keep[0] and keep[-1] < n
    assert sizes.train_subset(n, seed=3) == keep
    assert any(sizes.train_subset(n, seed=s) != keep for s in range(4, 12))
