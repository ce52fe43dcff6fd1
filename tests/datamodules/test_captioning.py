"""CaptionData: drawn shapes (determinism, boxes, word tags), the Karpathy-split JSON layout and a
local folder (committed fixture files), vocabulary thresholds, missing / corrupt images, and the
Flickr8k preset served from a local HTTP server (never the network)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import datamodules.caption_sources as sources
from attnlab_core.errors import UsageError
from datamodules.batching import BOS, EOS, UNK
from datamodules.captioning import IMAGE_MEAN, IMAGE_STD, CaptionData
from datamodules.download import Resource
from datamodules.shapes import COLOURS, generate_scenes
from tests.datamodules.served import serve, zip_of

FIXTURES = Path(__file__).parents[1] / "fixtures" / "captioning"


def _karpathy(**kw) -> CaptionData:
    return CaptionData(source="karpathy", karpathy_json=str(FIXTURES / "dataset_tiny.json"),
                       image_dir=str(FIXTURES / "images"), image_size=16, batch_size=4, **kw)


def test_shapes_are_deterministic_and_boxes_hold_the_named_colour() -> None:
    a, b = generate_scenes(5, seed=7, split="val"), generate_scenes(5, seed=7, split="val")
    assert all(np.array_equal(x.image, y.image) and x.captions == y.captions for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0].image, generate_scenes(1, seed=7, split="test")[0].image)
    for scene in a:
        xs = []
        for k, (x0, y0, x1, y1) in enumerate(scene.boxes):
            colour = next(w for w, o in zip(scene.captions[0], scene.objects[0], strict=True) if o == k)
            crop = scene.image[round(y0 * 64): round(y1 * 64), round(x0 * 64): round(x1 * 64)]
            assert (crop == COLOURS[colour]).all(-1).sum() > 30  # the named object is inside its box
            xs.append(x0)
        assert xs == sorted(xs)  # captions list objects left to right
        for caption, owners in zip(scene.captions, scene.objects, strict=True):
            assert len(caption) == len(owners) and {o for o in owners if o >= 0} == set(range(len(scene.boxes)))


def test_shapes_batches() -> None:
    dm = CaptionData(source="shapes", train_size=10, val_size=4, test_size=4, batch_size=4)
    assert dm.tgt_vocab_size == 4 + 5 + 4 + 3 + 2
    dm.setup("fit")
    assert len(dm.datasets["train"]) == 20 and len(dm.datasets["val"]) == 4  # pairs vs images
    b = next(iter(dm.val_dataloader()))
    assert b.src.shape == (4, 3, 64, 64) and b.tgt[:, 0].eq(BOS).all()
    assert b.objects.shape == (4, b.tgt.size(1) - 1) and b.boxes.shape[-1] == 4
    assert all(len(r) == 2 for r in b.refs) and dm.decode_tokens(b.tgt[0]) == b.refs[0][0]
    labels = b.tgt[:, 1:]
    assert (b.objects[labels == EOS] == -1).all()
    pixels = b.src * torch.tensor(IMAGE_STD)[:, None, None] + torch.tensor(IMAGE_MEAN)[:, None, None]
    assert pixels.min() >= -1e-5 and pixels.max() <= 1 + 1e-5


def test_karpathy_layout_splits_vocab_and_references() -> None:
    dm = _karpathy(min_freq=4)
    dm.setup("fit")
    ex = dm.raw_splits()
    assert [len(ex[s]) for s in ("train", "val", "test")] == [4, 2, 2]  # restval joins train
    assert ex["train"][2].image == FIXTURES / "images" / "img2.png"
    # counts over the 4 training images x 3 references: "a", "square", "block" 4 times, "the" 8; a colour 3
    words = set(dm.vocab.itos)
    assert {"a", "square", "the", "block"} <= words and not words & {"red", "green", "blue", "yellow"}
    assert "blue" in _karpathy(min_freq=3).vocab.itos
    b = next(iter(dm.val_dataloader()))
    assert b.src.shape == (2, 3, 16, 16) and len(b.refs[0]) == 3
    assert (b.objects == -1).all() and b.boxes.abs().sum() == 0
    no_restval = _karpathy(use_restval=False)
    assert len(no_restval.raw_splits()["train"]) == 3


def test_vocabulary_min_frequency_and_unknown_words() -> None:
    rare = _karpathy(min_freq=1).vocab
    common = _karpathy(min_freq=6).vocab
    assert rare.size > common.size > 4
    assert common.encode("yellow") == [UNK]


def test_folder_layout_tsv_and_jsonl() -> None:
    dm = CaptionData(source="folder", train_path=str(FIXTURES / "train.tsv"), val_path=str(FIXTURES / "val.jsonl"),
                     test_path=str(FIXTURES / "test.tsv"), image_dir=str(FIXTURES / "images"), image_size=16,
                     min_freq=1, batch_size=8)
    dm.setup("fit")
    ex = dm.raw_splits()
    assert len(ex["train"]) == 4 and all(len(e.captions) == 2 for e in ex["train"])
    assert ex["train"][0].captions[0] == ["a", "red", "square", "on", "the", "left", "."]
    assert len(ex["val"]) == 2
    assert next(iter(dm.train_dataloader())).tgt.shape[0] == 8


def test_missing_image_is_one_line_naming_the_file(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "images", tmp_path / "images")
    (tmp_path / "images" / "img5.png").unlink()
    dm = CaptionData(source="karpathy", karpathy_json=str(FIXTURES / "dataset_tiny.json"),
                     image_dir=str(tmp_path / "images"))
    with pytest.raises(UsageError) as err:
        dm.setup("fit")
    assert str(tmp_path / "images" / "img5.png") in str(err.value) and "\n" not in str(err.value)


def test_corrupt_image_is_one_line_naming_the_file(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "images", tmp_path / "images")
    (tmp_path / "images" / "img4.png").write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    dm = CaptionData(source="karpathy", karpathy_json=str(FIXTURES / "dataset_tiny.json"),
                     image_dir=str(tmp_path / "images"), image_size=16, batch_size=4)
    dm.setup("fit")
    with pytest.raises(UsageError) as err:
        next(iter(dm.val_dataloader()))
    assert str(tmp_path / "images" / "img4.png") in str(err.value) and "\n" not in str(err.value)


def test_bad_karpathy_json_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "dataset_bad.json"
    bad.write_text('{"images": [{"filename": "x.png"}]}')
    with pytest.raises(UsageError, match="dataset_bad.json.*images\\[0\\]"):
        CaptionData(source="karpathy", karpathy_json=str(bad), image_dir=str(tmp_path)).raw_splits()


def test_flickr8k_preset_downloads_with_checksums(http_server, monkeypatch, tmp_path: Path) -> None:
    """The published layouts: caption_datasets.zip holds dataset_flickr8k.json; Flickr8k_Dataset.zip
    holds Flicker8k_Dataset/*.jpg (here PNG bytes under the fixture names)."""
    captions = zip_of({"dataset_flickr8k.json": (FIXTURES / "dataset_tiny.json").read_bytes()})
    images = zip_of({f"Flicker8k_Dataset/{p.name}": p.read_bytes() for p in (FIXTURES / "images").glob("*.png")})
    for attr, name, data in (("KARPATHY_ZIP", "caption_datasets.zip", captions),
                             ("FLICKR8K_IMAGES", "Flickr8k_Dataset.zip", images)):
        monkeypatch.setattr(sources, attr, serve(http_server, name, data))
    dm = CaptionData(source="flickr8k", data_dir=str(tmp_path), image_size=16, min_freq=1, batch_size=4)
    assert dm.tgt_vocab_size > 4  # the link reads the caption JSON (downloaded here)
    dm.prepare_data()
    dm.setup("fit")
    assert next(iter(dm.train_dataloader())).src.shape == (4, 3, 16, 16)
    assert json.loads((tmp_path / "karpathy" / "dataset_flickr8k.json").read_text())["dataset"] == "tiny"
    monkeypatch.setattr(sources, "KARPATHY_ZIP", Resource(url=f"{http_server.url}/caption_datasets.zip",
                                                          checksum="md5:" + "0" * 32))
    with pytest.raises(UsageError, match="checksum mismatch"):
        CaptionData(source="flickr30k", data_dir=str(tmp_path / "other")).raw_splits()
