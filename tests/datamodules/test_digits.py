"""Translated / cluttered digits: determinism, digit placement, clutter, glyph variety, MNIST layout."""

import struct

import pytest
import torch

from datamodules.digits import DIGIT_SIZE, DigitBatch, TranslatedDigits, render_glyphs


def _dm(**kw) -> TranslatedDigits:
    args = {"train_size": 200, "val_size": 50, "test_size": 50, "batch_size": 16, "seed": 3, **kw}
    dm = TranslatedDigits(**args)
    dm.setup("fit")
    dm.setup("test")
    return dm


def test_same_seed_same_images_other_seed_other_images():
    a, b, c = _dm(), _dm(), _dm(seed=4)
    for split in ("train", "val", "test"):
        assert torch.equal(a.split(split).canvases, b.split(split).canvases)
        assert torch.equal(a.split(split).labels, b.split(split).labels)
    assert not torch.equal(a.split("train").canvases, c.split("train").canvases)
    assert not torch.equal(a.split("train").canvases[:50], a.split("val").canvases)


def test_digit_lies_in_its_box_and_positions_spread_over_the_canvas():
    data = _dm(canvas_size=60).split("train")
    boxes = data.boxes
    assert (boxes[:, :2] >= 0).all() and (boxes[:, 2:] <= 60).all()
    assert ((boxes[:, 2:] - boxes[:, :2]) == DIGIT_SIZE).all()
    for i in range(len(data)):
        x0, y0, x1, y1 = boxes[i].tolist()
        canvas = data.canvases[i].clone()
        assert canvas[y0:y1, x0:x1].sum() > 0
        canvas[y0:y1, x0:x1] = 0
        assert canvas.sum() == 0, "ink outside the digit's box without clutter"
    assert boxes[:, 0].min() <= 3 and boxes[:, 0].max() >= 29  # spans the 0..32 range of corners
    assert boxes[:, 1].min() <= 3 and boxes[:, 1].max() >= 29


def test_clutter_adds_ink_outside_the_digit():
    data = _dm(clutter=4).split("train")
    outside = []
    for i in range(len(data)):
        x0, y0, x1, y1 = data.boxes[i].tolist()
        canvas = data.canvases[i].clone()
        canvas[y0:y1, x0:x1] = 0
        outside.append(canvas.float().sum() > 0)
    assert sum(outside) > 0.9 * len(data)


def test_batches_are_float_images_in_unit_range():
    batch = next(iter(_dm().train_dataloader()))
    assert isinstance(batch, DigitBatch)
    assert batch.images.shape == (16, 1, 60, 60) and batch.images.dtype == torch.float32
    assert 0.0 <= batch.images.min() and batch.images.max() <= 1.0 and batch.images.max() > 0.5
    assert batch.labels.shape == (16,) and batch.boxes.shape == (16, 4)


def test_glyphs_vary_but_stay_recognisable():
    """A nearest-class-mean classifier on raw pixels: far above chance (recognisable digits), far from
    perfect (distortions make the task non-trivial)."""
    gen = torch.Generator().manual_seed(0)
    labels = torch.arange(3000) % 10
    images = render_glyphs(labels, generator=gen).view(3000, -1)
    train, test = images[:2000], images[2000:]
    means = torch.stack([train[labels[:2000] == d].mean(0) for d in range(10)])  # (10, 784)
    acc = (torch.cdist(test, means).argmin(1) == labels[2000:]).float().mean()
    assert 0.5 < acc < 0.98
    assert (images.view(-1, DIGIT_SIZE, DIGIT_SIZE)[:10].flatten(1).std(0) > 0).any()


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="canvas_size"):
        TranslatedDigits(canvas_size=20)
    with pytest.raises(ValueError, match="fragment_size"):
        TranslatedDigits(clutter=2, fragment_size=40)


def _write_idx(path, data: torch.Tensor) -> None:
    """An IDX file as published on yann.lecun.com (big-endian header, uint8 payload)."""
    magic = 0x0800 + data.dim()
    path.write_bytes(struct.pack(">I", magic) + b"".join(struct.pack(">I", n) for n in data.shape)
                     + data.to(torch.uint8).numpy().tobytes())


def test_mnist_source_reads_torchvision_layout(tmp_path):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    gen = torch.Generator().manual_seed(0)
    for prefix, n in (("train", 30), ("t10k", 12)):
        _write_idx(raw / f"{prefix}-images-idx3-ubyte", torch.randint(0, 256, (n, 28, 28), generator=gen))
        _write_idx(raw / f"{prefix}-labels-idx1-ubyte", torch.arange(n) % 10)
    dm = _dm(source="mnist", data_dir=str(tmp_path), train_size=20, val_size=10, test_size=12)
    assert len(dm.split("train")) == 20 and len(dm.split("val")) == 10 and len(dm.split("test")) == 12
    assert sorted(dm.split("test").labels.tolist()) == sorted((torch.arange(12) % 10).tolist())
    train_val = torch.cat([dm.split("train").labels, dm.split("val").labels])
    assert sorted(train_val.tolist()) == sorted((torch.arange(30) % 10).tolist())  # a partition of MNIST train


def test_missing_mnist_names_the_folder(tmp_path):
    dm = TranslatedDigits(source="mnist", data_dir=str(tmp_path), train_size=4, val_size=2, test_size=2)
    with pytest.raises(FileNotFoundError, match="MNIST"):
        dm.setup("fit")
