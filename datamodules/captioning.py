"""Image captioning data: drawn shapes (offline default), Flickr8k / Flickr30k / COCO in the Karpathy
splits, any Karpathy-layout JSON, a local folder, or Tux Paint's clip-art stamps — as :class:`CaptionBatch`\\ es.

Sources (``datamodules.caption_sources``: one ``CAPTION_SOURCES`` entry each, reading a frozen ``CaptionSpec``):

- ``shapes``: the procedurally drawn scenes of ``datamodules.shapes`` (64 × 64, 2–3 objects,
  captions naming them left to right, object boxes kept for the localisation score). No files.
- ``flickr8k``: ``dataset_flickr8k.json`` (Karpathy splits, 6000 / 1000 / 1000 images × 5
  captions) and the images, both downloaded once with checksums into ``data_dir``.
- ``flickr30k`` / ``coco``: the Karpathy JSON is downloaded; the images must be under
  ``image_dir`` (default ``data_dir/flickr30k/flickr30k-images`` / ``data_dir/coco``).
- ``karpathy``: any JSON in that layout (``karpathy_json``) with images under ``image_dir``.
- ``folder``: ``train_path`` / ``val_path`` / ``test_path`` caption tables (TSV/CSV/JSONL with
  ``image_column`` and ``caption_column``), images relative to ``image_dir``.
- ``clipart``: Tux Paint's clip-art stamps as Debian's ``tuxpaint-stamps-default`` installs them
  (``stamps_path``, default /usr/share/tuxpaint/stamps): 785 PNGs, one English caption each, split by stamp
  group (639 / 82 / 64), rendered at ``image_size`` and cached under ``data_dir/clipart``
  (``datamodules.clipart``). Absent, construction stops with one line naming the package.

Vocabulary: words of the training captions seen at least ``min_freq`` times (most frequent
first, ties alphabetical), after the reserved PAD/BOS/EOS/UNK = 0..3. It is built from the caption
files alone, so ``tgt_vocab_size`` is known when the CLI links it to the model (reading — for the
``flickr*``/``coco`` presets, downloading — the caption JSON at that moment).

Training iterates over (image, reference) pairs, evaluation over images with every reference
(multi-reference BLEU / CIDEr-D); the teacher-forced ``val/loss`` uses the first reference.
A missing image file is one error line naming it (checked in ``setup``); an unreadable one when
it is loaded.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError
from torch import Tensor
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import v2

from attnlab_core.batches import IMAGE_MEAN, IMAGE_STD  # noqa: F401  (re-exported)
from attnlab_core.errors import UsageError
from datamodules.batching import BOS, EOS, SplitDataModule, pad_sequences
from datamodules.caption_sources import CAPTION_SOURCES, SPLITS, CaptionExample, CaptionSource, check_images
from datamodules.sources import CaptionSpec
from datamodules.tokenization import WordVocab


class CaptionBatch(NamedTuple):
    """A batch of images with captions.

    Attributes:
        src: (B, 3, H, W) float images, normalised with ``IMAGE_MEAN`` / ``IMAGE_STD``.
        tgt: (B, T) ``[BOS, w_1 .. w_n, EOS, PAD ...]`` (one reference); labels are ``tgt[:, 1:]``.
        objects: (B, T - 1) long, aligned with the labels: the index into ``boxes`` of the object
            each label names, -1 where none (or unknown).
        boxes: (B, K, 4) float (x0, y0, x1, y1) in [0, 1] per object (zeros when unknown; K >= 1).
        refs: B lists of reference captions (space-joined tokens) for BLEU / CIDEr-D.
    """

    src: Tensor
    tgt: Tensor
    objects: Tensor
    boxes: Tensor
    refs: list[list[str]]


Item = tuple[Tensor, list[int], list[int], list[tuple[float, float, float, float]], list[str]]


def collate_captions(items: Sequence[Item]) -> CaptionBatch:
    """Stack images, pad captions (adding BOS/EOS), objects (-1) and boxes (zeros)."""
    k = max(1, max(len(i[3]) for i in items))
    boxes = torch.zeros(len(items), k, 4)
    for b, item in enumerate(items):
        if item[3]:
            boxes[b, : len(item[3])] = torch.tensor(item[3])
    return CaptionBatch(
        src=torch.stack([i[0] for i in items]),
        tgt=pad_sequences([[BOS, *i[1], EOS] for i in items]),
        objects=pad_sequences([[*i[2], -1] for i in items], pad=-1),
        boxes=boxes,
        refs=[i[4] for i in items],
    )


def load_image(path: Path) -> Image.Image:
    """An RGB PIL image; a missing or unreadable file is one UsageError line naming it."""
    try:
        with Image.open(path) as img:
            return img.convert("RGB")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such image file") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
        raise UsageError(f"{path}: cannot read the image ({type(err).__name__}: {err})") from None


class CaptionDataset(Dataset):
    """(image tensor, caption ids, objects, boxes, references) items.

    Args:
        examples: the split's examples.
        vocab: word vocabulary. max_len: references longer than this are cut (training only).
        images: in-memory (H, W, 3) uint8 images for integer ``image`` fields (shapes); else None.
        transform: PIL image or (3, H, W) uint8 tensor -> normalised float tensor.
        train: one item per (image, reference) pair; else one per image (its first reference).
    """

    def __init__(self, examples: list[CaptionExample], *, vocab: WordVocab, max_len: int,
                 images: list[np.ndarray] | None, transform: v2.Transform, train: bool) -> None:
        self.examples, self.vocab, self.max_len, self.images = examples, vocab, max_len, images
        self.transform = transform
        self.index = [(i, c) for i, ex in enumerate(examples) for c in range(len(ex.captions) if train else 1)]
        self.limit = max_len if train else None

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, n: int) -> Item:
        i, c = self.index[n]
        ex = self.examples[i]
        if isinstance(ex.image, Path):
            pixels = self.transform(load_image(ex.image))
        else:
            pixels = self.transform(torch.from_numpy(self.images[ex.image]).permute(2, 0, 1))  # (3, H, W)
        words = ex.captions[c][: self.limit]
        ids = [self.vocab.stoi.get(w, self.vocab.stoi["<unk>"]) for w in words]
        objects = ex.objects[c][: len(ids)] if ex.objects else [-1] * len(ids)
        return pixels, ids, objects, ex.boxes, [" ".join(r) for r in ex.captions]


def build_vocab(captions: Sequence[Sequence[str]], *, min_freq: int) -> WordVocab:
    """Words seen at least ``min_freq`` times, most frequent first (ties alphabetical)."""
    counts = Counter(w for c in captions for w in c)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return WordVocab(words=[w for w, n in ranked if n >= min_freq and w not in ("<pad>", "<s>", "</s>", "<unk>")])


def image_transform(image_size: int) -> v2.Transform:
    """Resize the short side, centre-crop to a square, scale to [0, 1], normalise (ImageNet statistics)."""
    return v2.Compose([v2.ToImage(), v2.Resize(image_size, antialias=True), v2.CenterCrop(image_size),
                       v2.ToDtype(torch.float32, scale=True), v2.Normalize(IMAGE_MEAN, IMAGE_STD)])


class CaptionData(SplitDataModule):
    """Images + captions -> :class:`CaptionBatch`.

    Split sizes are caps on the number of images (None: all; shapes: 6000 / 250 / 500 drawn); train
    keeps its first images, which for shapes are random.

    Args:
        source: :data:`CaptionSource`.
        data_dir: downloads and extracted corpora.
        image_dir: image root (``karpathy`` / ``folder``; overrides the presets' default).
        karpathy_json: the JSON file of ``source=karpathy``.
        train_path / val_path / test_path: caption tables of ``source=folder``.
        image_column / caption_column: their column (or JSONL key) names.
        use_restval: Karpathy ``restval`` images join the training split.
        min_freq: vocabulary threshold (Xu et al. keep the 10,000 most frequent COCO words;
            5 is the common Flickr choice). Ignored by ``shapes`` (its lexicon is fixed).
        max_len: training references are cut to this many words.
        image_size: side of the square model input (shapes: drawn at 64, never resized).
        stamps_path: the ``clipart`` stamps folder (None: /usr/share/tuxpaint/stamps).
    """

    split_defaults = {"batch_size": 32}

    def __init__(
        self,
        *,
        source: CaptionSource = "shapes",
        data_dir: str = "data",
        image_dir: str | None = None,
        karpathy_json: str | None = None,
        train_path: str | None = None,
        val_path: str | None = None,
        test_path: str | None = None,
        image_column: str = "image",
        caption_column: str = "caption",
        use_restval: bool = True,
        min_freq: int = 5,
        max_len: int = 30,
        image_size: int = 224,
        stamps_path: str | None = None,
        **split: Any,
    ) -> None:
        super().__init__(split=self.split_spec(**split))
        self.save_hyperparameters()
        spec = CaptionSpec(data_dir=Path(data_dir), train_path=train_path, val_path=val_path, test_path=test_path,
                           image_dir=image_dir, karpathy_json=karpathy_json, image_column=image_column,
                           caption_column=caption_column, use_restval=use_restval, seed=self.seed, sizes=self.sizes,
                           image_size=image_size, stamps_path=stamps_path)
        self.use_source(CAPTION_SOURCES, source, spec)  # runs the source's check (installed data) first
        self.examples: dict[str, list[CaptionExample]] = {}
        self.images: dict[str, list[np.ndarray]] = {}
        self._vocab: WordVocab | None = None
        self.datasets: dict[str, CaptionDataset] = {}

    # ----------------------------------------------------------------- examples and vocabulary
    def raw_splits(self) -> dict[str, list[CaptionExample]]:
        """Examples of every split, capped (reads caption files; shapes are drawn here)."""
        if self.examples:
            return self.examples
        examples, self.images = self.corpus.read(self.spec)
        for split in SPLITS:
            if not examples[split]:
                raise UsageError(f"captioning data ({self.source}): the {split} split is empty")
        self.examples = {s: self.sizes.cap(examples[s], s) for s in SPLITS}
        return self.examples

    @property
    def vocab(self) -> WordVocab:
        """The word vocabulary (built from the training captions on first use)."""
        if self._vocab is None:
            if self.corpus.lexicon is not None:
                self._vocab = WordVocab(words=self.corpus.lexicon())
            else:
                train = self.raw_splits()["train"]
                self._vocab = build_vocab([c for ex in train for c in ex.captions], min_freq=self.hparams.min_freq)
        return self._vocab

    @property
    def tgt_vocab_size(self) -> int:
        """Caption vocabulary size, the 4 special ids included (the CLI links it to the model)."""
        return self.vocab.size

    # ----------------------------------------------------------------- Lightning hooks
    def prepare_data(self) -> None:
        """Download what the preset needs (Karpathy JSON, Flickr8k images); nothing for shapes."""
        if self.corpus.fetch_images is not None and not self.hparams.image_dir:
            self.corpus.fetch_images(self.spec)
        self.raw_splits()

    def setup(self, stage: str) -> None:
        """Examples, vocabulary and datasets of every split, identically on every rank."""
        if self.datasets:
            return
        examples = self.raw_splits()
        check_images(examples, source=self.source)
        transform = image_transform(self.hparams.image_size)
        if self.images:  # drawn in memory at the model's size: no resize
            transform = v2.Compose([v2.ToDtype(torch.float32, scale=True), v2.Normalize(IMAGE_MEAN, IMAGE_STD)])
        for split in SPLITS:
            self.datasets[split] = CaptionDataset(
                examples[split], vocab=self.vocab, max_len=self.hparams.max_len, images=self.images.get(split),
                transform=transform, train=split == "train",
            )

    def _loader(self, split: str) -> DataLoader:
        return self.loader(self.datasets[split], split, collate_fn=collate_captions)

    def decode_tokens(self, ids: Sequence[int] | Tensor) -> str:
        """Caption ids -> space-joined words (stops at EOS, drops PAD/BOS)."""
        return self.vocab.decode(ids.tolist() if isinstance(ids, Tensor) else list(ids))
