"""Where captioning examples come from: Karpathy-split JSON files, a local folder, the drawn shapes; one
:data:`CAPTION_SOURCES` entry (:class:`CaptionCorpus`) per ``source``, each reading a frozen
:class:`~datamodules.sources.CaptionSpec` (never the DataModule).

Karpathy & Fei-Fei 2015 published one JSON per dataset (``dataset_flickr8k.json``,
``dataset_flickr30k.json``, ``dataset_coco.json`` in ``caption_datasets.zip``)::

    {"images": [{"filename": "1000268201_693b08cb0e.jpg", "filepath": "val2014" (COCO only),
                 "split": "train" | "val" | "test" | "restval",
                 "sentences": [{"tokens": ["a", "child", ...], "raw": "A child ..."}, ...]}, ...]}

``restval`` (COCO's remaining validation images) joins the training split unless told otherwise,
as in Karpathy's and Xu et al.'s setups. Image files are ``image_dir / filepath / filename``.

A local folder is one caption table per split (``.tsv`` / ``.csv`` with a header, or ``.jsonl``)
with an image column (a path relative to ``image_dir``) and a caption column; rows with the
same image are that image's references.

Downloads (``datamodules.download``, checksummed): the Karpathy JSONs (md5 as published with the
torchvision R package's Flickr datasets) and the Flickr8k images (jbrownlee's mirror of the
Illinois release). Flickr30k and COCO images are not downloaded: put them under ``image_dir``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from attnlab_core.errors import UsageError
from datamodules.clipart import check_stamps, read_clipart, stamps_root
from datamodules.download import Resource, extract, fetch
from datamodules.shapes import generate_scenes, shapes_lexicon
from datamodules.sources import CaptionSpec, Source
from datamodules.splits import SPLITS
from datamodules.tokenization import read_records, read_text, word_tokenize

CaptionSource = Literal["shapes", "flickr8k", "flickr30k", "coco", "karpathy", "folder", "clipart"]
"""Where the images and captions come from (see ``datamodules.captioning``'s docstring)."""

KARPATHY_ZIP = Resource(url="https://cs.stanford.edu/people/karpathy/deepimagesent/caption_datasets.zip",
                        checksum="md5:4fa8c08369d22fe16e41dc124bd1adc2")
FLICKR8K_IMAGES = Resource(
    url="https://github.com/jbrownlee/Datasets/releases/download/Flickr8k/Flickr8k_Dataset.zip",
    checksum="md5:f18a1e2920de5bd84dae7cf08ec78978",
)
KARPATHY_FILES = {"flickr8k": "dataset_flickr8k.json", "flickr30k": "dataset_flickr30k.json",
                  "coco": "dataset_coco.json"}
IMAGE_HINTS = {
    "flickr30k": "request Flickr30k at https://shannon.cs.illinois.edu/DenotationGraph/ and unpack "
                 "flickr30k-images/",
    "coco": "unpack http://images.cocodataset.org/zips/train2014.zip and val2014.zip (train2014/, val2014/)",
}
SHAPES_SIZES = {"train": 6000, "val": 250, "test": 500}
DEFAULT_IMAGE_DIRS = {"flickr8k": "flickr8k/Flicker8k_Dataset",  # the folder name inside the published archive
                      "flickr30k": "flickr30k/flickr30k-images", "coco": "coco"}


@dataclass
class CaptionExample:
    """One image and its references.

    Attributes:
        image: a file path, or an index into an in-memory image array (shapes).
        captions: references, each a list of tokens.
        objects: per reference, per token, the index of the object it names (-1: none); empty when unknown.
        boxes: per object, (x0, y0, x1, y1) in [0, 1]; empty when unknown.
    """

    image: Path | int
    captions: list[list[str]]
    objects: list[list[int]] = field(default_factory=list)
    boxes: list[tuple[float, float, float, float]] = field(default_factory=list)


def read_karpathy(path: Path, *, image_dir: Path, use_restval: bool = True) -> dict[str, list[CaptionExample]]:
    """Examples per split from a Karpathy-split JSON file (layout in the module docstring)."""
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as err:
        raise UsageError(f"{path}:{err.lineno}: invalid JSON ({err.msg})") from None
    images = data.get("images") if isinstance(data, dict) else None
    if not isinstance(images, list):
        raise UsageError(f"{path}: expected a Karpathy-split JSON object with an 'images' list")
    out: dict[str, list[CaptionExample]] = {s: [] for s in SPLITS}
    restval = "train" if use_restval else None
    for n, item in enumerate(images):
        try:
            split = {"restval": restval}.get(item["split"], item["split"])
            caps = [s["tokens"] if "tokens" in s else word_tokenize(s["raw"]) for s in item["sentences"]]
            file = image_dir / item.get("filepath", "") / item["filename"]
        except (KeyError, TypeError) as err:
            raise UsageError(f"{path}: images[{n}] lacks {err} (need filename, split, sentences)") from None
        if split in out:
            out[split].append(CaptionExample(image=file, captions=[[str(t) for t in c] for c in caps if c]))
    return out


def read_folder(paths: dict[str, Path], *, image_dir: Path, image_column: str,
                caption_column: str) -> dict[str, list[CaptionExample]]:
    """Examples per split from one caption table per split; rows of one image are its references."""
    out: dict[str, list[CaptionExample]] = {}
    for split, path in paths.items():
        grouped: dict[str, list[list[str]]] = {}
        for _, (image, caption) in read_records(path, fields=(image_column, caption_column)):
            tokens = word_tokenize(caption)
            if tokens:
                grouped.setdefault(image.strip(), []).append(tokens)
        out[split] = [CaptionExample(image=image_dir / name, captions=caps) for name, caps in grouped.items()]
    return out


def read_shapes(sizes: dict[str, int], *, seed: int) -> tuple[dict[str, list[CaptionExample]], dict[str, list]]:
    """The drawn-shapes splits: examples (images are indices) and the images per split."""
    examples, images = {}, {}
    for split in SPLITS:
        scenes = generate_scenes(sizes[split], seed=seed, split=split)
        images[split] = [s.image for s in scenes]
        examples[split] = [CaptionExample(image=i, captions=s.captions, objects=s.objects, boxes=s.boxes)
                           for i, s in enumerate(scenes)]
    return examples, images


def karpathy_json(name: str, *, data_dir: Path) -> Path:
    """``dataset_<name>.json``: from ``data_dir/karpathy/`` or downloaded (checksummed) and extracted there."""
    target = data_dir / "karpathy"
    path = target / KARPATHY_FILES[name]
    if not path.is_file():
        extract(fetch(KARPATHY_ZIP, cache_dir=data_dir / "downloads"), target)
    if not path.is_file():
        hits = sorted(target.rglob(KARPATHY_FILES[name]))
        if not hits:
            raise UsageError(f"{KARPATHY_ZIP.url}: the archive has no {KARPATHY_FILES[name]}")
        return hits[0]
    return path


def fetch_flickr8k_images(data_dir: Path) -> None:
    """Download (checksummed) and extract the Flickr8k images into ``data_dir/flickr8k`` once."""
    root = data_dir / "flickr8k"
    if not root.is_dir():
        extract(fetch(FLICKR8K_IMAGES, cache_dir=data_dir / "downloads"), root)


def check_images(examples: dict[str, list[CaptionExample]], *, source: str) -> None:
    """Every image file exists; else one line naming the first missing file (and how many are missing)."""
    missing = [ex.image for split in examples.values() for ex in split
               if isinstance(ex.image, Path) and not ex.image.is_file()]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        hint = f"; {IMAGE_HINTS[source]}" if source in IMAGE_HINTS else ""
        raise UsageError(f"{missing[0]}: no such image file{more}{hint}")


SourceSplits = tuple[dict[str, list[CaptionExample]], dict[str, list[np.ndarray]]]
"""Examples per split, and the in-memory images their integer ``image`` fields index (drawn sources)."""


def _shapes(spec: CaptionSpec) -> SourceSplits:
    return read_shapes(spec.sizes.or_defaults(SHAPES_SIZES), seed=spec.seed)


def _folder(spec: CaptionSpec) -> SourceSplits:
    paths = {s: Path(str(spec.path(s))) for s in SPLITS}
    return read_folder(paths, image_dir=Path(spec.image_dir or "."), image_column=spec.image_column,
                       caption_column=spec.caption_column), {}


def _karpathy(spec: CaptionSpec) -> SourceSplits:
    return read_karpathy(Path(str(spec.karpathy_json)), image_dir=Path(spec.image_dir or "."),
                         use_restval=spec.use_restval), {}


def _preset(name: str) -> Callable[[CaptionSpec], SourceSplits]:
    """A Karpathy-split corpus: its JSON downloaded into ``data_dir``, images under ``DEFAULT_IMAGE_DIRS``."""

    def read(spec: CaptionSpec) -> SourceSplits:
        image_dir = Path(spec.image_dir) if spec.image_dir else spec.data_dir / DEFAULT_IMAGE_DIRS[name]
        return read_karpathy(karpathy_json(name, data_dir=spec.data_dir), image_dir=image_dir,
                             use_restval=spec.use_restval), {}

    return read


def _clipart(spec: CaptionSpec) -> SourceSplits:
    """Tux Paint's stamps (``datamodules.clipart``), rendered at ``image_size`` and cached in ``data_dir/clipart``."""
    read = read_clipart(stamps_root(spec.stamps_path), image_size=spec.image_size, cache_dir=spec.data_dir / "clipart")
    examples = {s: [CaptionExample(image=i, captions=[tokens]) for i, (tokens, _) in enumerate(rows)]
                for s, rows in read.items()}
    return examples, {s: [image for _, image in rows] for s, rows in read.items()}


def _stamps_installed(spec: CaptionSpec) -> None:
    check_stamps(stamps_root(spec.stamps_path))


def _flickr8k_images(spec: CaptionSpec) -> None:
    fetch_flickr8k_images(spec.data_dir)


@dataclass(frozen=True, kw_only=True)
class CaptionCorpus(Source[CaptionSpec]):
    """How one captioning ``source`` is obtained.

    Args:
        read: spec -> examples per split (and in-memory images for drawn sources).
        lexicon: a closed vocabulary (drawn sources); else it is built from the training captions.
        fetch_images: (spec) -> None, downloading the images into ``data_dir`` in ``prepare_data`` (unless
            ``image_dir`` is given).
    """

    read: Callable[[CaptionSpec], SourceSplits]
    lexicon: Callable[[], list[str]] | None = None
    fetch_images: Callable[[CaptionSpec], None] | None = None


CAPTION_SOURCES: dict[str, CaptionCorpus] = {
    "shapes": CaptionCorpus(read=_shapes, lexicon=shapes_lexicon),
    "flickr8k": CaptionCorpus(read=_preset("flickr8k"), fetch_images=_flickr8k_images),
    "flickr30k": CaptionCorpus(read=_preset("flickr30k")),
    "coco": CaptionCorpus(read=_preset("coco")),
    "karpathy": CaptionCorpus(read=_karpathy, requires=("karpathy_json",)),
    "folder": CaptionCorpus(read=_folder, requires=("train_path", "val_path", "test_path")),
    "clipart": CaptionCorpus(read=_clipart, check=_stamps_installed),
}
"""Every :data:`CaptionSource`, resolved once in ``CaptionData.__init__``."""
