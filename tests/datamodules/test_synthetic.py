"""SyntheticSeq2Seq: determinism, ranges, task correctness, exactly-once DDP eval sharding."""

from __future__ import annotations

from typing import get_args

import pytest
import torch

from datamodules.batching import BOS, EOS, N_SPECIAL, PAD, UNK, UnpaddedShardSampler, ids_to_text
from datamodules.synthetic import SYNTHETIC_TASKS, SyntheticSeq2Seq, SyntheticTask

SMALL = {"train_size": 200, "val_size": 50, "test_size": 50, "batch_size": 16}


def make(**kw: object) -> SyntheticSeq2Seq:
    return SyntheticSeq2Seq(**{**SMALL, **kw})  # type: ignore[arg-type]


def test_registry_covers_literal() -> None:
    assert set(SYNTHETIC_TASKS) == set(get_args(SyntheticTask))


def test_deterministic_across_instances_and_global_rng() -> None:
    a = make(seed=7)
    torch.manual_seed(0)
    a_val = a.split("val")
    torch.manual_seed(99)  # the global RNG must not matter
    b = make(seed=7)
    assert b.split("val") == a_val
    assert b.split("train") == a.split("train")
    assert make(seed=8).split("val") != a_val


def test_splits_differ_and_eval_independent_of_train_size() -> None:
    dm = make()
    assert dm.split("train")[:50] != dm.split("val")
    assert dm.split("val") != dm.split("test")
    assert make(train_size=999).split("val") == dm.split("val")
    assert make(train_size=999).split("test") == dm.split("test")


def test_lengths_within_ranges_and_test_range_honoured() -> None:
    dm = make(min_len=2, max_len=5, test_min_len=8, test_max_len=10, test_size=200)
    train_lens = {len(s) for s, _ in dm.split("train")}
    assert train_lens == set(range(2, 6))  # every length in range is drawn
    assert {len(s) for s, _ in dm.split("val")} <= set(range(2, 6))
    assert {len(s) for s, _ in dm.split("test")} == set(range(8, 11))
    default = make(min_len=2, max_len=5)
    assert {len(s) for s, _ in default.split("test")} <= set(range(2, 6))


@pytest.mark.parametrize("task", get_args(SyntheticTask))
def test_targets_correct_and_content_only(task: str) -> None:
    dm = make(task=task, vocab_size=9)
    expected = {"copy": lambda s: s, "reverse": lambda s: list(reversed(s)), "sort": sorted}[task]
    for src, tgt in dm.split("train"):
        assert tgt == expected(src)
        assert all(N_SPECIAL <= t < 9 for t in src)
    assert {t for s, _ in dm.split("train") for t in s} == set(range(N_SPECIAL, 9))


def test_batches_are_seq2seq_batches() -> None:
    dm = make(task="reverse")
    dm.setup("fit")
    batch = next(iter(dm.val_dataloader()))
    src0, tgt0 = dm.split("val")[0]
    assert batch.src.shape[0] == 16 and batch.tgt.shape[0] == 16
    assert batch.src[0, : len(src0)].tolist() == src0
    assert batch.tgt[0, : len(tgt0) + 2].tolist() == [BOS, *tgt0, EOS]
    inner = batch.src[batch.src != PAD]
    assert bool((inner >= N_SPECIAL).all())  # no specials inside content
    assert dm.decode_tokens(batch.tgt[0]) == " ".join(f"t{t}" for t in tgt0)


def _rows(loader: torch.utils.data.DataLoader) -> list[list[int]]:
    return [[t for t in row if t != PAD] for b in loader for row in b.src.tolist()]


def test_train_loader_shuffles_reproducibly_eval_loaders_do_not() -> None:
    dm = make()
    data = [s for s, _ in dm.split("train")]
    loader = dm.train_dataloader()
    epoch0 = _rows(loader)
    assert sorted(epoch0) == sorted(data) and epoch0 != data  # a permutation, not the stored order
    assert _rows(loader) == epoch0 == _rows(make().train_dataloader())  # a function of (seed, epoch)
    loader.sampler.set_epoch(1)  # what Lightning's fit loop does each epoch
    epoch1 = _rows(loader)
    assert sorted(epoch1) == sorted(data) and epoch1 != epoch0
    assert _rows(make(seed=5).train_dataloader()) != epoch0
    assert _rows(dm.val_dataloader()) == [s for s, _ in dm.split("val")]
    assert _rows(dm.test_dataloader()) == [s for s, _ in dm.split("test")]
    assert _rows(dm.predict_dataloader()) == [s for s, _ in dm.split("test")]


def test_vocab_properties_available_after_init() -> None:
    dm = SyntheticSeq2Seq(vocab_size=31)
    assert dm.src_vocab_size == dm.tgt_vocab_size == 31
    assert dm._data == {}  # nothing generated at construction


@pytest.mark.parametrize("n, world", [(101, 4), (7, 3), (2, 5), (1, 1)])
def test_shard_sampler_exactly_once(n: int, world: int) -> None:
    shards = [list(UnpaddedShardSampler(n, num_replicas=world, rank=r)) for r in range(world)]
    flat = [i for s in shards for i in s]
    assert sorted(flat) == list(range(n))  # each index once, no padding duplicates
    for r, s in enumerate(shards):
        assert s == list(range(r, n, world))
        assert len(UnpaddedShardSampler(n, num_replicas=world, rank=r)) == len(s)


def test_shard_sampler_defaults_to_single_process() -> None:
    assert list(UnpaddedShardSampler(5)) == [0, 1, 2, 3, 4]


def test_ids_to_text() -> None:
    assert ids_to_text([BOS, 5, 7, EOS, 9, PAD]) == "t5 t7"
    assert ids_to_text(torch.tensor([5, PAD, UNK])) == "t5 <unk>"
    itos = ["<pad>", "<s>", "</s>", "<unk>", "a", "b"]
    assert ids_to_text([BOS, 4, 5, EOS], itos=itos) == "a b"


@pytest.mark.parametrize(
    "kw, name",
    [
        ({"vocab_size": 4}, "vocab_size"),
        ({"min_len": 0}, "min_len"),
        ({"min_len": 6, "max_len": 5}, "min_len"),
        ({"test_min_len": 9, "test_max_len": 8}, "test_min_len"),
        ({"test_min_len": 20}, "test_min_len"),
        ({"train_size": 0}, "train_size"),
        ({"val_size": 0}, "val_size"),
        ({"test_size": -1}, "test_size"),
        ({"batch_size": 0}, "batch_size"),
        ({"num_workers": -1}, "num_workers"),
        ({"task": "bogus"}, "task"),
    ],
)
def test_invalid_args_raise_naming_the_arg(kw: dict[str, object], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        SyntheticSeq2Seq(**kw)  # type: ignore[arg-type]


def test_token_budget_batches_cover_the_train_set_once_with_little_padding():
    dm = SyntheticSeq2Seq(min_len=5, max_len=50, train_size=500, val_size=4, test_size=4, max_tokens=400)
    dm.setup("fit")
    seen, padded, real = [], 0, 0
    for batch in dm.train_dataloader():
        assert batch.tgt.numel() <= 400 or batch.tgt.size(0) == 1
        padded += batch.tgt.numel()
        real += int((batch.tgt != 0).sum())
        seen.extend(tuple(row[row != 0].tolist()) for row in batch.src)
    assert sorted(seen) == sorted(tuple(s) for s, _ in dm.split("train"))
    assert real / padded > 0.9, "length bucketing should remove most padding"
