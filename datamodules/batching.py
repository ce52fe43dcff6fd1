"""Batch types, special token ids and padding shared by every datamodule and model, and the datamodule
base classes (:class:`SplitDataModule`: the options and hooks every datamodule shares; :class:`DrawnSplits`
for splits drawn in memory).

Token ids 0..3 are reserved in every vocabulary (synthetic, sentencepiece, word-level):
PAD=0, BOS=1, EOS=2, UNK=3.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict
from typing import Any, ClassVar

import lightning as L
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler

from attnlab_core.batches import RegressionBatch, Seq2SeqBatch, ids_to_text  # noqa: F401  (re-exported)
from attnlab_core.errors import UsageError
from attnlab_core.options import flat_signature, with_defaults
from attnlab_core.tokens import BOS, EOS, PAD, UNK  # noqa: F401  (re-exported for datamodules)
from datamodules.sources import DataSpec, Source
from datamodules.splits import Split, SplitOptions, SplitSizes

N_SPECIAL = 4


def pad_sequences(seqs: Sequence[Sequence[int]], *, pad: int = PAD) -> Tensor:
    """Right-pad integer sequences (lists, tuples, arrays or tensors) into a (B, L) long tensor, L >= 1.

    Padded as Python lists and made a tensor in one call: a slice assignment per sequence cost about 1 ms a
    batch of 64, which the quick recurrent trials paid on every one of their ~1,300 steps (issue #26)."""
    rows = [s.tolist() if hasattr(s, "tolist") else list(s) for s in seqs]
    width = max(max((len(r) for r in rows), default=0), 1)
    return torch.tensor([r + [pad] * (width - len(r)) for r in rows], dtype=torch.long).reshape(len(rows), width)


def collate_pairs(pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> Seq2SeqBatch:
    """Collate ``(src_ids, tgt_ids)`` pairs; BOS/EOS are added around each target here."""
    src = pad_sequences([p[0] for p in pairs])
    tgt = pad_sequences([[BOS, *p[1], EOS] for p in pairs])
    return Seq2SeqBatch(src=src, tgt=tgt)


def collate_regression(items: Sequence[tuple[Tensor, Tensor]]) -> RegressionBatch:
    """Stack ``(x (T, C), y ())`` items into a :class:`RegressionBatch` (x (B, T, C), y (B,))."""
    return RegressionBatch(x=torch.stack([i[0] for i in items]), y=torch.stack([i[1] for i in items]))


def distributed_world() -> tuple[int, int]:
    """``(world_size, rank)`` of the initialised default process group, else ``(1, 0)``."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_world_size(), torch.distributed.get_rank()
    return 1, 0


class UnpaddedShardSampler(DistributedSampler):
    """Evaluation sampler that gives every example to exactly one rank: rank r gets r, r+W, r+2W, ...

    Unlike :class:`~torch.utils.data.DistributedSampler` it never pads with duplicates, so val/test
    metrics count every example exactly once. Ranks may therefore get ceil(N/W) or floor(N/W) examples
    (and a different number of batches): never run per-step collectives (``self.log(...,
    sync_dist=True, on_step=True)``, ``all_gather`` in ``*_step``) on loaders using it; accumulate in
    torchmetrics and sync once at ``compute()``.

    It subclasses ``DistributedSampler`` only so that Lightning (``use_distributed_sampler=True``)
    recognises it as already sharded and does not wrap it a second time.

    Args:
        dataset_len: N, the number of examples to shard.
        num_replicas: W; default: world size of the initialised process group, else 1.
        rank: this process's rank; default: rank in the initialised process group, else 0.
    """

    def __init__(self, dataset_len: int, *, num_replicas: int | None = None, rank: int | None = None) -> None:
        world, this_rank = distributed_world()
        num_replicas = world if num_replicas is None else num_replicas
        rank = this_rank if rank is None else rank
        if num_replicas < 1:
            raise ValueError(f"num_replicas must be >= 1, got {num_replicas}")
        super().__init__(range(dataset_len), num_replicas=num_replicas, rank=rank, shuffle=False)  # type: ignore[arg-type]
        self.num_samples = len(range(rank, dataset_len, num_replicas))
        self.total_size = dataset_len

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.rank, self.total_size, self.num_replicas))

    def __len__(self) -> int:
        return self.num_samples


def build_dataloader(
    dataset: Dataset,
    *,
    train: bool,
    batch_size: int,
    seed: int,
    num_workers: int,
    collate_fn: Callable[[list[Any]], Any],
) -> DataLoader:
    """DataLoader whose sampler is already correct for one process or DDP.

    The CLI sets ``Trainer(use_distributed_sampler=False)``, so sharding is done here (both samplers
    are ``DistributedSampler`` instances, so Lightning would leave them alone even with the default
    ``use_distributed_sampler=True``):

    - train: ``DistributedSampler(num_replicas=W, rank=r, shuffle=True, seed=seed, drop_last=False)``,
      also when W = 1 (then nothing is padded). The order is a function of (seed, epoch) only, never of
      the global RNG or of how often the loader is rebuilt: Lightning's fit loop calls ``set_epoch`` on
      ``dataloader.sampler`` every epoch (``lightning.fabric.utilities.data._set_sampler_epoch``, called
      from ``FitLoop.on_advance_start``). Outside Lightning call ``loader.sampler.set_epoch(e)`` yourself.
    - eval: :class:`UnpaddedShardSampler` (every example exactly once; in order when W = 1).

    Args:
        dataset: map-style dataset of N items.
        train: shuffle (and pad-shard under DDP) if True, else exactly-once evaluation order.
        batch_size: examples per batch (per rank).
        seed: shuffling seed; identical on every rank.
        num_workers: DataLoader worker processes.
        collate_fn: list of items -> batch.
    """
    world, rank = distributed_world()
    sampler: Sampler[int] = (
        DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=seed, drop_last=False)
        if train
        else UnpaddedShardSampler(len(dataset), num_replicas=world, rank=rank)  # type: ignore[arg-type]
    )
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=num_workers,
        collate_fn=collate_fn,
        persistent_workers=num_workers > 0,
        pin_memory=torch.cuda.is_available(),  # page-locked batches copy to the GPU asynchronously
    )


STAGE_SPLITS: dict[str, tuple[str, ...]] = {
    "fit": ("train", "val"),
    "validate": ("val",),
    "test": ("test",),
    "predict": ("test",),
}
"""The splits each Lightning stage needs."""


def require(checks: Iterable[tuple[bool, str]]) -> None:
    """Raise a one-line UsageError with the message of the first failed ``(ok, message)`` check."""
    for ok, message in checks:
        if not ok:
            raise UsageError(message)


class SplitDataModule(L.LightningDataModule):
    """What every attnlab datamodule shares: its split sizes, batch size, seed and loader workers (checked
    once, here, each bad value a one-line UsageError naming the option), and the four dataloader hooks
    over one ``_loader(split)``.

    Train batches are shuffled (seeded; a DistributedSampler under DDP); val/test/predict batches
    come in order, each example on exactly one rank. Predict uses the test split.
    """

    # No "Args:" section in this docstring: jsonargparse would show it as the doc of every subclass option
    # that the subclass leaves undocumented (``--data.help`` would change).

    split_defaults: ClassVar[dict[str, Any]] = {}
    """The module's defaults that differ from ``SplitOptions``'s (sizes it gives no number stay ``null``)."""
    split_spec: ClassVar[Callable[..., SplitOptions]]
    """``with_defaults(SplitOptions, **split_defaults)``, set for each subclass."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Give each module its ``split_spec`` and, for ``inspect.signature(cls)``, a flat signature: its own
        arguments, then the split options with its defaults (``attnlab_core.options``)."""
        super().__init_subclass__(**kwargs)
        cls.split_spec = staticmethod(with_defaults(SplitOptions, **cls.split_defaults))
        cls.__signature__ = flat_signature(cls, cls.split_spec)  # type: ignore[attr-defined]

    def __init__(self, *, split: SplitOptions) -> None:
        super().__init__()
        nullable = self.split_defaults.get("train_size") is None
        sizes = SplitSizes(split.train_size, split.val_size, split.test_size, nullable=nullable)
        if split.batch_size < 1:
            raise UsageError(f"batch_size must be >= 1, got {split.batch_size}")
        if split.num_workers < 0:
            raise UsageError(f"num_workers must be >= 0, got {split.num_workers}")
        self.save_hyperparameters(asdict(split))
        self.sizes, self.batch_size, self.seed = sizes, split.batch_size, split.seed
        self.num_workers = split.num_workers

    def use_source(self, registry: Mapping[str, Source[Any]], source: str, spec: DataSpec) -> None:
        """Keep ``source``, its ``registry`` entry (``self.corpus``) and the frozen ``spec`` its readers take
        (``self.spec``; ``self.data_dir`` is its ``data_dir``); every spec field the entry ``requires`` must
        be given (one line naming the missing options), and its ``check`` passes (what it reads is there)."""
        corpus = registry[source]
        missing = [name for name in corpus.requires if not getattr(spec, name)]
        if missing:
            raise UsageError(f"source={source} needs " + " and ".join(f"--data.init_args.{m}" for m in missing))
        if corpus.check is not None:
            corpus.check(spec)
        self.source, self.corpus, self.spec, self.data_dir = source, corpus, spec, spec.data_dir

    def loader(self, dataset: Dataset, split: str, *, collate_fn: Callable[[list[Any]], Any]) -> DataLoader:
        """:func:`build_dataloader` over ``dataset`` (shuffled for ``train``) with this module's options."""
        return build_dataloader(dataset, train=split == "train", batch_size=self.batch_size, seed=self.seed,
                                num_workers=self.num_workers, collate_fn=collate_fn)

    def _loader(self, split: str) -> DataLoader:
        raise NotImplementedError

    def train_dataloader(self) -> DataLoader:
        return self._loader("train")

    def val_dataloader(self) -> DataLoader:
        return self._loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._loader("test")

    def predict_dataloader(self) -> DataLoader:
        return self._loader("test")


class DrawnSplits(SplitDataModule):
    """A datamodule whose splits are drawn in memory by ``draw(split)`` (from ``split_generator(seed,
    split)``, so every rank and run sees the same examples), each on first use, and kept."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._data: dict[str, Any] = {}

    def draw(self, split: Split) -> Any:
        raise NotImplementedError

    def split(self, name: Split) -> Any:
        """Split ``name``, drawn on first use and kept."""
        if name not in self._data:
            self._data[name] = self.draw(name)
        return self._data[name]

    def setup(self, stage: str) -> None:
        """Draw the splits ``stage`` needs (fit: train+val; validate: val; test/predict: test)."""
        for name in STAGE_SPLITS.get(stage, ()):
            self.split(name)


class OneVocabulary:
    """Source and target share one vocabulary: the ``vocab_size`` init argument, known before any data, so
    the CLI links ``src_vocab_size`` / ``tgt_vocab_size`` to the model at once."""

    vocab_size: int

    @property
    def src_vocab_size(self) -> int:
        return self.vocab_size

    @property
    def tgt_vocab_size(self) -> int:
        return self.vocab_size
